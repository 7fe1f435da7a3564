#include "core/analysis/PlanConformance.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "core/events/CapturedLayout.h"
#include "core/plan/Config.h"
#include "core/plan/Plan.h"
#include "core/plan/Topology.h"

namespace stagescope::analysis {
namespace {

using events::Direction;
using events::Side;

// One point-to-point message as a rank sees it.
struct WireMessage {
  Side side = Side::Send;
  Direction direction = Direction::Activation;
  int peer = -1, microbatch = -1;
  bool stuck = false;  // the job was stuck on it (a waits row), not part of its identity
  int64_t firstSeq = -1, lastSeq = -1;  // the action_seq range of its frames (not identity)
  auto key() const { return std::make_tuple(side, direction, peer, microbatch); }
  bool operator<(const WireMessage& o) const { return key() < o.key(); }
  bool operator==(const WireMessage& o) const { return key() == o.key(); }
};

std::string describe(const WireMessage& m) {
  std::ostringstream o;
  o << (m.side == Side::Send ? "send the " : "receive the ")
    << (m.direction == Direction::Activation ? "activation" : "gradient") << " of microbatch "
    << m.microbatch << (m.side == Side::Send ? " to rank " : " from rank ") << m.peer;
  return o.str();
}

std::string describe(const std::vector<WireMessage>& ms) {
  if (ms.empty()) return "nothing";
  std::string out;
  for (size_t i = 0; i < ms.size(); ++i) out += (i ? ", " : "") + describe(ms[i]);
  return out;
}

bool isShapeEdge(const std::string& edge) {
  constexpr std::string_view kSuffix = "#shape";
  return edge.size() >= kSuffix.size() &&
         edge.compare(edge.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

// The messages `rank` posted in `iteration`, each once, in the order of its first frame.  A
// payload is a message (keyed by its edge too: two edges between one pair of ranks carry two
// messages); its shape message and a wait on either frame belong to the payload of the same
// (side, direction, peer, microbatch) whatever group carried it — a job may send the shape on
// the pipeline group and the payload on WORLD.  Counts the shape frames into `shapes`.
// The positions of a run's transfers and waits rows per (rank, iteration), built once: each
// (rank, iteration) reads its own rows instead of scanning the run's.
struct RowIndex {
  std::map<std::pair<int, int>, std::vector<size_t>> transfers, waits;
  explicit RowIndex(const model::RunModel& run) {
    for (size_t i = 0; i < run.transfers.size(); ++i)
      transfers[{run.transfers[i].rank, run.transfers[i].iteration}].push_back(i);
    for (size_t i = 0; i < run.waits.size(); ++i)
      waits[{run.waits[i].rank, run.waits[i].iteration}].push_back(i);
  }
  static const std::vector<size_t>& of(const std::map<std::pair<int, int>, std::vector<size_t>>& m,
                                       int rank, int iteration) {
    static const std::vector<size_t> kNone;
    const auto it = m.find({rank, iteration});
    return it == m.end() ? kNone : it->second;
  }
};

std::vector<WireMessage> postedMessages(const model::RunModel& run, const RowIndex& rows, int rank,
                                        int iteration, int64_t& shapes) {
  struct Posted {
    WireMessage m;
    int64_t firstSeq;
    int64_t firstNs;
    void saw(int64_t seq, int64_t ns) {
      if (std::tie(seq, ns) < std::tie(firstSeq, firstNs)) firstSeq = seq, firstNs = ns;
      m.firstSeq = std::min(m.firstSeq, seq);
      m.lastSeq = std::max(m.lastSeq, seq);
    }
  };
  auto first = [](WireMessage m, int64_t seq, int64_t ns) {
    m.firstSeq = m.lastSeq = seq;
    return Posted{m, seq, ns};
  };
  std::vector<Posted> posted;
  std::map<std::tuple<Side, Direction, int, int, std::string>, size_t> byEdge;
  std::map<std::tuple<Side, Direction, int, int>, size_t> byMessage;  // the first such payload
  auto add = [&](const WireMessage& m, const std::string& edge, int64_t seq, int64_t ns) {
    const auto key = std::make_tuple(m.side, m.direction, m.peer, m.microbatch);
    if (!edge.empty()) {
      auto [it, inserted] =
          byEdge.try_emplace(std::tuple_cat(key, std::make_tuple(edge)), posted.size());
      if (!inserted) return posted[it->second].saw(seq, ns);
      byMessage.try_emplace(key, posted.size());
      posted.push_back(first(m, seq, ns));
      return;
    }
    // a shape frame or a wait: the payload's, else a message of its own
    if (auto it = byMessage.find(key); it != byMessage.end()) {
      posted[it->second].saw(seq, ns);
      posted[it->second].m.stuck = posted[it->second].m.stuck || m.stuck;
      return;
    }
    byMessage.emplace(key, posted.size());
    posted.push_back(first(m, seq, ns));
  };
  auto wire = [&](Side side, Direction direction, int peer, int microbatch, bool stuck) {
    WireMessage m;
    m.side = side;
    m.direction = direction;
    m.peer = peer;
    m.microbatch = microbatch;
    m.stuck = stuck;
    return m;
  };
  for (bool payloads : {true, false}) {
    for (size_t i : RowIndex::of(rows.transfers, rank, iteration)) {
      const auto& t = run.transfers[i];
      const bool shape = isShapeEdge(t.edge);
      if (shape == payloads) continue;
      shapes += shape ? 1 : 0;
      const WireMessage m = wire(t.side, t.direction, t.side == Side::Send ? t.dstRank : t.srcRank,
                                 t.microbatch, false);
      add(m, payloads ? std::string(t.edge) : std::string(), t.actionSeq, t.startNs);
    }
  }
  // A message the rank was stuck on has no transfers row (it never completed): its waits row.
  for (size_t i : RowIndex::of(rows.waits, rank, iteration)) {
    const auto& w = run.waits[i];
    if (w.op != events::WaitOp::Send && w.op != events::WaitOp::Recv) continue;
    add(wire(w.op == events::WaitOp::Send ? Side::Send : Side::Recv, w.direction, w.peer,
             w.microbatch, true),
        "", w.actionSeq, w.timeNs);
  }
  std::sort(posted.begin(), posted.end(), [](const Posted& a, const Posted& b) {
    return std::tie(a.firstSeq, a.firstNs) < std::tie(b.firstSeq, b.firstNs);
  });
  std::vector<WireMessage> out;
  for (const auto& p : posted) out.push_back(p.m);
  return out;
}

// The messages of one planned communication action that cross the wire (a colocated
// hand-off to this rank itself does not), sorted.
std::vector<WireMessage> plannedMessages(const plan::Action& a, int rank) {
  std::vector<WireMessage> out;
  for (const auto& m : a.messages) {
    if (m.peer == rank) continue;
    out.push_back({m.side, m.direction, m.peer, m.microbatch});
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string holdsOf(const plan::RankPlan& rp) {
  std::string out;
  for (const auto& s : rp.stages)
    out += (out.empty() ? "" : " + ") + s.module + " stage " + std::to_string(s.pp);
  return out;
}

// The messages in `window` that `planned` lacks, and those of `planned` not in `window`.
void difference(std::vector<WireMessage> window, const std::vector<WireMessage>& planned,
                std::vector<WireMessage>& extra, std::vector<WireMessage>& missing) {
  std::sort(window.begin(), window.end());
  std::set_difference(window.begin(), window.end(), planned.begin(), planned.end(),
                      std::back_inserter(extra));
  std::set_difference(planned.begin(), planned.end(), window.begin(), window.end(),
                      std::back_inserter(missing));
}

// "SF 2", or "SF_RB 2/0" for a combined action (its activation's / its gradient's microbatch).
std::string spanLabel(const plan::Action& a) {
  std::string out = std::string(events::toString(a.kind)) + " " + std::to_string(a.microbatch);
  if (a.gradMicrobatch >= 0 && a.gradMicrobatch != a.microbatch)
    out += "/" + std::to_string(a.gradMicrobatch);
  return out;
}

// The span of the job's records a window of messages covers.
PlanSpan spanOf(const std::vector<WireMessage>& window, int iteration, std::string label,
                bool matched) {
  PlanSpan s;
  s.iteration = iteration;
  s.label = std::move(label);
  s.matched = matched;
  for (const auto& m : window) {
    if (m.firstSeq < 0) continue;
    s.firstSeq = s.firstSeq < 0 ? m.firstSeq : std::min(s.firstSeq, m.firstSeq);
    s.lastSeq = std::max(s.lastSeq, m.lastSeq);
  }
  return s;
}

// Judges one rank over `iterations`; fills the verdict's state and sentence.
void judgeRank(const model::RunModel& run, const RowIndex& rows, const plan::RankPlan& rp,
               int iterations, bool completed, int64_t& shapes, RankConformance& v) {
  for (int it = 0; it < iterations; ++it) {
    const std::vector<WireMessage> posted = postedMessages(run, rows, rp.rank, it, shapes);
    v.posted += static_cast<int64_t>(posted.size());
    size_t pos = 0;
    int index = 0;
    for (const auto& action : rp.actions) {
      const std::vector<WireMessage> want = plannedMessages(action, rp.rank);
      if (want.empty()) continue;
      v.planned += static_cast<int64_t>(want.size());
      if (v.state != RankConformance::State::Conforms) continue;  // counting only
      const size_t n = std::min(want.size(), posted.size() - pos);
      std::vector<WireMessage> window(posted.begin() + static_cast<std::ptrdiff_t>(pos),
                                      posted.begin() + static_cast<std::ptrdiff_t>(pos + n));
      std::vector<WireMessage> extra, missing;
      difference(window, want, extra, missing);
      const std::string label = plan::actionLabel(action);
      std::ostringstream s;
      const auto stuckOn =
          std::find_if(window.begin(), window.end(), [](const WireMessage& m) { return m.stuck; });
      v.iteration = it;
      v.action = index;
      const bool clean = extra.empty() && missing.empty() && stuckOn == window.end();
      v.spans.push_back(spanOf(window, it, spanLabel(action), clean));
      if (clean) {
        pos += n;
        ++v.actionsMatched;
        ++index;
        continue;
      }
      if (extra.empty() && missing.empty()) {
        v.state = RankConformance::State::Stopped;
        s << "stopped in iteration " << it << " inside its communication action #" << index << " ("
          << label << ": " << describe(want) << "), every message of it posted as "
          << "planned; it waits to " << describe(*stuckOn) << " (never completed)";
        v.sentence = s.str();
        continue;
      }
      const bool ranOut = pos + n == posted.size() && extra.empty();
      if (ranOut && !completed) {
        v.state = RankConformance::State::Stopped;
        // A capture records a message when it completes, or when the job waits on it: a message
        // posted and never completed is not seen, so "not seen" is all that can be said.
        s << "stopped in iteration " << it << " at its communication action #" << index << " ("
          << label << ": " << describe(want)
          << "); recorded of it: " << (window.empty() ? std::string("nothing") : describe(window));
        if (stuckOn != window.end()) s << ", the job waiting to " << describe(*stuckOn);
        s << "; " << missing.size() << " of its " << want.size()
          << " messages not seen (never posted, or posted and never completed)";
      } else {
        v.state = RankConformance::State::Deviates;
        s << "deviates in iteration " << it << " at its communication action #" << index
          << ": the plan posts " << label << " (" << describe(want) << "); the job posted "
          << (window.empty() ? std::string("nothing more") : describe(window));
        if (!extra.empty()) s << " — not in the plan's action: " << describe(extra);
      }
      v.sentence = s.str();
    }
    if (v.state == RankConformance::State::Conforms && pos < posted.size()) {
      v.state = RankConformance::State::Deviates;
      v.iteration = it;
      v.action = index;
      v.sentence = "posted messages beyond the plan's in iteration " + std::to_string(it) + ": " +
                   describe(std::vector<WireMessage>(
                       posted.begin() + static_cast<std::ptrdiff_t>(pos), posted.end()));
    }
  }
}

// The iterations a run's transfers span (iteration numbers the job gave with step()).
int iterationsOf(const model::RunModel& run) {
  int n = 0;
  for (const auto& t : run.transfers) n = std::max(n, t.iteration + 1);
  return std::max(n, run.info.iterations);
}

// §7.5 and the warmup: every rank whose own schedule (declared by the job) differs from the plan.
void nameCauses(const std::vector<events::JobStage>& job, const plan::Plan& p, Conformance& c) {
  for (const auto& j : job) {
    if (j.rank < 0 || static_cast<size_t>(j.rank) >= p.ranks.size()) continue;
    const plan::RankPlan& rp = p.ranks[static_cast<size_t>(j.rank)];
    if (j.warmup == rp.warmup && j.globalStage == rp.globalStage) continue;
    std::ostringstream s;
    s << j.module << " stage " << j.stage << " (rank " << j.rank << "): the job's warmup is "
      << j.warmup << " where the plan has " << rp.warmup << "; the job places it at global stage "
      << j.globalStage << " of " << j.totalStages << ", the plan at " << rp.globalStage << " of "
      << p.totalStages;
    ScheduleCause cause{j.rank, s.str(), "", ""};
    if (j.globalStage < rp.globalStage) {
      cause.section = "§7.5";
      cause.why =
          "the plan right-aligns a shorter branch next to the first stage it feeds; placed from "
          "the sources, its warmup exceeds its receiver's by more than one and the two sides' "
          "combined sends and receives no longer pair up";
    }
    c.causes.push_back(std::move(cause));
  }
}

}  // namespace

std::string ScheduleCause::line() const {
  return section.empty() ? what : what + " (" + section + ": " + why + ")";
}

std::string ScheduleCause::brief() const {
  return section.empty() ? what : what + " (" + section + ")";
}

std::vector<ScheduleCause> declaredScheduleCauses(const events::RunInfo& info) {
  const std::string layout = events::declaredLayoutText(info);
  if (layout.empty()) return {};
  Conformance c;
  try {
    const plan::RunConfig cfg = plan::parseConfig(layout, "the layout the job declared");
    const plan::Topology topology(cfg);
    nameCauses(info.jobSchedule, plan::makePlan(cfg, topology), c);
  } catch (const std::exception&) {
    return {};  // check says why (judgeAgainstPlan)
  }
  return c.causes;
}

int Conformance::deviating() const {
  return static_cast<int>(std::count_if(ranks.begin(), ranks.end(), [](const auto& r) {
    return r.state == RankConformance::State::Deviates;
  }));
}

int Conformance::stopped() const {
  return static_cast<int>(std::count_if(ranks.begin(), ranks.end(), [](const auto& r) {
    return r.state == RankConformance::State::Stopped;
  }));
}

Conformance judgeAgainstPlan(const model::RunModel& run, const std::string& configText,
                             const std::string& layout) {
  Conformance c;
  c.layout = layout;
  plan::RunConfig cfg;
  try {
    cfg = plan::parseConfig(configText, layout);
  } catch (const std::exception& e) {
    c.notJudged = "the layout (" + layout + ") is not a valid config: " + e.what();
    return c;
  }
  const plan::Topology topology(cfg);
  const plan::Plan p = plan::makePlan(cfg, topology);
  if (p.worldSize != run.info.worldSize) {
    c.notJudged = "the layout (" + layout + ") has " + std::to_string(p.worldSize) +
                  " ranks, the run " + std::to_string(run.info.worldSize);
    return c;
  }
  c.judged = true;
  c.iterations = iterationsOf(run);
  const bool completed = run.info.status == events::RunStatus::Completed;
  const RowIndex rows(run);
  for (const auto& rp : p.ranks) {
    RankConformance v;
    v.rank = rp.rank;
    v.holds = holdsOf(rp);
    v.planWarmup = rp.warmup;
    v.planGlobalStage = rp.globalStage;
    judgeRank(run, rows, rp, c.iterations, completed, c.shapeMessages, v);
    c.ranks.push_back(std::move(v));
  }
  nameCauses(run.info.jobSchedule, p, c);
  return c;
}

}  // namespace stagescope::analysis
