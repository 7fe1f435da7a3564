#include "core/analysis/Check.h"
#include "core/analysis/Accumulation.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "core/analysis/Analysis.h"
#include "core/analysis/Compare.h"
#include "core/analysis/GradientAudit.h"
#include "core/analysis/Inputs.h"
#include "core/analysis/LossScale.h"
#include "core/analysis/MessageRoles.h"
#include "core/analysis/NcclReplay.h"
#include "core/analysis/NonFinite.h"
#include "core/analysis/OptimizerStep.h"
#include "core/analysis/PlanConformance.h"
#include "core/analysis/Replicas.h"
#include "core/analysis/Tolerance.h"
#include "core/events/CapturedLayout.h"

namespace stagescope::analysis {

using events::ActionKind;
using events::ActionRecord;
using events::Direction;
using events::RunStatus;
using events::Side;
using events::TransferRecord;
using model::RunModel;

const char* toString(CheckStatus s) {
  switch (s) {
    case CheckStatus::Passed:
      return "passed";
    case CheckStatus::Failed:
      return "failed";
    case CheckStatus::Skipped:
      return "skipped";
  }
  return "?";
}

const CheckResult* CheckReport::find(const std::string& name) const {
  for (const auto& c : checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

namespace {

struct Ctx {
  const RunModel& run;
  const CheckOptions& opts;
  std::vector<model::TransferPair> scratch;
  const std::vector<model::TransferPair>* pairs = nullptr;
};

void add(CheckResult& r, const CheckOptions& opts, Finding f) {
  ++r.total;
  r.status = CheckStatus::Failed;
  if (r.findings.size() < opts.maxFindings) {
    f.name = r.name;
    f.exitCode = r.exitCode;
    r.findings.push_back(std::move(f));
  }
}

std::string describeTransfer(const TransferRecord& t) {
  std::ostringstream s;
  s << "edge " << t.edge << " " << toString(t.direction) << " iteration " << t.iteration
    << " microbatch " << t.microbatch << " rank " << t.srcRank << " -> rank " << t.dstRank;
  return s.str();
}

Finding transferFinding(const TransferRecord& t) {
  Finding f;
  f.rank = t.rank;
  f.peerRank = t.side == Side::Send ? t.dstRank : t.srcRank;
  f.iteration = t.iteration;
  f.microbatch = t.microbatch;
  f.edge = t.edge;
  f.direction = toString(t.direction);
  f.actionSeq = t.actionSeq;
  f.tensor = "transfer " + t.edge + " " + toString(t.direction);
  return f;
}

std::string describeAction(const ActionRecord& a) {
  std::ostringstream s;
  s << toString(a.kind);
  if (a.microbatch >= 0) s << " mb" << a.microbatch;
  if (!a.peers.empty()) {
    s << " peers [";
    for (size_t i = 0; i < a.peers.size(); ++i) s << (i ? "," : "") << a.peers[i];
    s << "]";
  }
  return s.str();
}

// ---- run_status -----------------------------------------------------------------------------
void checkStatus(Ctx& c, CheckResult& r) {
  const auto& info = c.run.info;
  r.summary = std::string("run status is ") + toString(info.status);
  if (!c.opts.recover.empty() && !c.opts.live.live()) {
    Finding f;
    f.message = "not all of the run's records are in its file: recover it with `" + c.opts.recover +
                "`, then check again";
    add(r, c.opts, f);
  }
  if (c.opts.live.live()) {
    // Being written as it was read: a snapshot, never a finished run, whatever it holds.
    r.summary += " (" + c.opts.live.summary + ")";
    Finding f;
    f.message = "run has not ended: " + c.opts.live.line() +
                "; this is a snapshot, not a verdict: check again once the run has ended";
    add(r, c.opts, f);
  }
  if (info.status != RunStatus::Completed) {
    Finding f;
    std::ostringstream m;
    m << "run did not complete: status " << toString(info.status);
    if (!info.statusReason.empty()) m << " (" << info.statusReason << ")";
    f.message = m.str();
    if (!c.opts.live.live()) add(r, c.opts, f);
    for (const auto& d : c.run.diagnoses) {
      if (d.informational()) continue;  // a clock offset is not a failure
      Finding g;
      g.rank = d.rank;
      g.iteration = d.iteration;
      g.actionSeq = d.actionSeq;
      g.peerRank = d.waitsOnRank;
      std::ostringstream dm;
      dm << d.kindName() << " on rank " << d.rank;
      if (d.iteration >= 0) dm << " iteration " << d.iteration;
      if (d.actionSeq >= 0) {
        dm << " action #" << d.actionSeq;
        int64_t ai = findAction(c.run, d.rank, d.iteration, d.actionSeq, true);
        if (ai >= 0) {
          g.action = toString(c.run.plan[d.rank][ai].kind);
          g.microbatch = c.run.plan[d.rank][ai].microbatch;
          dm << " (" << describeAction(c.run.plan[d.rank][ai]) << ")";
        }
      }
      if (d.waitsOnRank >= 0) dm << " waits on rank " << d.waitsOnRank;
      if (!d.message.empty()) dm << ": " << d.message;
      g.message = dm.str();
      add(r, c.opts, g);
    }
  }
  if (c.run.partial) {
    Finding f;
    f.message = "run file is partial";
    for (const auto& n : c.run.notes) f.message += "; " + n;
    add(r, c.opts, f);
  }
  // A completed run lost no record: every DP replica of every TP shard of every reduced
  // gradient is there (Coverage.h, the rule compare's coverage applies).  A run that did not
  // complete fails above; its missing copies are a consequence.  A captured job records what
  // its own calls record (gradients where it calls record_gradients, never inputs): these are
  // stagescope's own runs' contracts, not a capture's (docs/capture.md).
  const bool captured = info.captured();
  if (info.status == RunStatus::Completed && !c.run.partial && !captured) {
    const CopyCoverage copies = reducedCopyCoverage(c.run, c.opts.filter);
    if (copies.expected > 0) r.summary += "; " + copies.summary();
    for (const auto& m : copies.missing) {
      Finding f;
      f.message = "a record is missing from a completed run: " + m;
      add(r, c.opts, f);
    }
    if (copies.missingCount() > static_cast<int64_t>(copies.missing.size())) {
      Finding f;
      f.message =
          std::to_string(copies.missingCount() - static_cast<int64_t>(copies.missing.size())) +
          " more reduced-gradient copies missing";
      add(r, c.opts, f);
    }
    // Input rows (level full): one per first-stage rank, iteration and microbatch (Inputs.h).
    const InputsReport inputs = inputRowCoverage(c.run, c.opts.filter);
    if (inputs.rowsExpected > 0)
      r.summary += "; " + std::to_string(inputs.rowsExpected - inputs.missingRows.size()) + " of " +
                   std::to_string(inputs.rowsExpected) + " expected input rows recorded";
    for (const auto& m : inputs.missingRows) {
      Finding f;
      f.message = "a record is missing from a completed run: " + m;
      add(r, c.opts, f);
    }
  }
}

// ---- unmatched_transfer, shape_mismatch, checksum_mismatch ----------------------------------
// Whether the record filter kept rank `rank`'s records of `iteration` (a colocated rank: when
// it keeps any of the rank's modules).
bool recorded(const Ctx& c, int rank, int iteration) {
  return !c.opts.filter.any() || c.opts.filter.wantsRankOf(c.run, iteration, rank);
}

// The one side a message recorded: its send without a receive, or its receive without a send.
struct LoneSide {
  const TransferRecord* record = nullptr;  // nullptr: both sides, or neither
  bool send = false;
  int partner() const { return send ? record->dstRank : record->srcRank; }  // who lacks one
};
LoneSide loneSide(const std::vector<TransferRecord>& t, const model::TransferPair& p) {
  if (p.send >= 0 && p.recv < 0) return {&t[p.send], true};
  if (p.recv >= 0 && p.send < 0) return {&t[p.recv], false};
  return {};
}

Finding unmatchedFinding(const LoneSide& lone) {
  const TransferRecord& x = *lone.record;
  Finding f = transferFinding(x);
  f.action = lone.send ? "send" : "recv";
  f.message = std::string(lone.send ? "send without receive: " : "receive without send: ") +
              describeTransfer(x) + " (recorded by rank " + std::to_string(x.rank) +
              ", no matching " + (lone.send ? "receive" : "send") + " on rank " +
              std::to_string(lone.partner()) + ")";
  return f;
}

void checkPairs(Ctx& c, CheckResult& unmatched, CheckResult& shape, CheckResult& checksum) {
  const auto& t = c.run.transfers;
  int64_t both = 0, filtered = 0, awaitingMerge = 0;
  for (const auto& p : *c.pairs) {
    const LoneSide lone = loneSide(t, p);
    if (lone.record && !recorded(c, lone.partner(), lone.record->iteration)) {
      ++filtered;  // the partner's records were filtered out by design
      continue;
    }
    if ((p.send < 0 || p.recv < 0) && !c.opts.recover.empty()) {
      ++awaitingMerge;  // its other side may be in a shard not merged yet
      continue;
    }
    if (lone.record) {
      add(unmatched, c.opts, unmatchedFinding(lone));
      continue;
    }
    if (p.send < 0 || p.recv < 0) continue;
    ++both;
    const auto& s = t[p.send];
    const auto& v = t[p.recv];
    if (!p.shapeMatches || !p.dtypeMatches) {  // the pair's own rule (TransferPair::sidesAgree)
      Finding f = transferFinding(v);
      f.message = "shape mismatch on " + describeTransfer(s) + ": sent " + formatShape(s.shape) +
                  " " + s.dtype + ", received " + formatShape(v.shape) + " " + v.dtype;
      add(shape, c.opts, f);
    }
    if (!p.checksumMatches) {
      Finding f = transferFinding(v);
      f.message = "checksum mismatch on " + describeTransfer(s) + ": sender rank " +
                  std::to_string(s.rank) + " recorded " + formatChecksum(s.checksum) +
                  ", receiver rank " + std::to_string(v.rank) + " recorded " +
                  formatChecksum(v.checksum);
      add(checksum, c.opts, f);
    }
  }
  unmatched.summary = std::to_string(c.pairs->size()) + " messages, " + std::to_string(both) +
                      " with both sides recorded";
  if (filtered) {
    unmatched.summary += "; " + std::to_string(filtered) + " with one side outside the record " +
                         "filter (" + c.opts.filter.describe() + ", skipped)";
  }
  if (awaitingMerge) {
    Finding f;
    f.message = std::to_string(awaitingMerge) +
                " messages with one side not in the run file: consequences of the records not "
                "merged (see run_status: `" +
                c.opts.recover + "`)";
    add(unmatched, c.opts, f);
  }
  if (c.pairs->empty()) {
    for (CheckResult* r : {&unmatched, &shape, &checksum}) {
      r->status = CheckStatus::Skipped;
      r->summary = "skipped: no messages recorded";
    }
    return;
  }
  if (both == 0) {
    shape.status = checksum.status = CheckStatus::Skipped;
    shape.summary = checksum.summary = "skipped: no message has both sides recorded";
    return;
  }
  shape.summary = std::to_string(both) + " matched messages compared";
  checksum.summary = shape.summary;
  if (c.run.info.level < events::RecordLevel::Stats) {
    checksum.status = CheckStatus::Skipped;
    checksum.summary = "skipped: recording level below stats carries no checksums";
  }
}

// ---- unmatched_transfer, second part: message roles -------------------------------------------
// A message whose two sides mean different tensors (MessageRoles.h) is a message that was not
// matched as the job meant it: the same class as a send without its receive.
void checkRoles(Ctx& c, CheckResult& r) {
  const RoleJudgement j = judgeMessageRoles(c.run);
  if (j.judged == 0 && j.withoutRole == 0) return;  // no roles recorded
  r.summary += "; " + std::to_string(j.judged) + " with a role recorded on both sides";
  if (j.mismatches.empty()) {
    r.summary += ", all taken in their role";
  } else {
    r.summary += ", " + std::to_string(j.mismatches.size()) + " not taken in their role";
  }
  for (const auto& m : j.mismatches) {
    Finding f = transferFinding(c.run.transfers[static_cast<size_t>(m.recv)]);
    f.action = "recv";
    f.message = "message role: " + m.why;
    add(r, c.opts, f);
  }
}

// ---- checksum_mismatch, second part: replicated copies ----------------------------------------
// Copies that must be equal (Replicas.h): each DP/TP copy of a reduced gradient, initial
// parameter or parameter after the step, and each TP copy of a loss, against the first copy --
// the one reference_gradient and compare judge.  Corrupted data like a message whose two sides
// disagree, so it is the same class.
void checkReplicas(Ctx& c, CheckResult& r) {
  const ReplicaReport rep = compareReplicas(c.run);
  const bool wasSkipped = r.status == CheckStatus::Skipped;
  for (const auto& m : rep.mismatches) {
    Finding f;
    if (m.loss) {
      const auto& a = c.run.losses[static_cast<size_t>(m.first)];
      const auto& b = c.run.losses[static_cast<size_t>(m.other)];
      f.rank = b.rank;
      f.peerRank = a.rank;
      f.iteration = b.iteration;
      f.microbatch = b.microbatch;
      f.tensor = "loss";
    } else {
      const auto& a = c.run.gradients[static_cast<size_t>(m.first)];
      const auto& b = c.run.gradients[static_cast<size_t>(m.other)];
      f.rank = b.rank;
      f.peerRank = a.rank;
      f.iteration = b.iteration;
      f.tensor = b.param.str();
    }
    f.message = describe(c.run, m);
    add(r, c.opts, f);
  }
  if (rep.copies == 0) return;  // nothing replicated: the messages' summary stands
  std::string part = std::to_string(rep.copies) + " replica copies of " +
                     std::to_string(rep.groups) +
                     " gradients, parameters and losses compared exactly with their first copy";
  if (rep.unjudged) part += " (" + std::to_string(rep.unjudged) + " without checksum or values)";
  if (wasSkipped) {
    if (rep.mismatches.empty()) r.status = CheckStatus::Passed;
    r.summary = part + "; messages " + r.summary;
  } else {
    r.summary += "; " + part;
  }
}

// ---- plan_order -----------------------------------------------------------------------------
// A run without a plan (a captured PyTorch job) has per-rank lists that are all empty.
bool holdsPlan(const RunModel& run) {
  for (const auto& list : run.plan) {
    if (!list.empty()) return true;
  }
  return false;
}

bool sameAction(const ActionRecord& p, const ActionRecord& a) {
  if (p.kind != a.kind || p.microbatch != a.microbatch) return false;
  if (p.peers == a.peers) return true;  // interned lists: the same list is the same handle
  std::vector<int32_t> x = p.peers, y = a.peers;
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  return x == y;
}

// The records of one iteration in a list sorted by (iteration, seq).
// The planned list of `iteration` on `rank`: that iteration's records, or (when the plan was
// stored once) the only planned iteration's.
std::span<const ActionRecord> plannedFor(const RunModel& run, int rank, int iteration) {
  if (rank < 0 || static_cast<size_t>(rank) >= run.plan.size()) return {};
  const auto& list = run.plan[rank];
  auto out = iterationRange(list, iteration);
  if (out.empty() && !list.empty() && list.front().iteration == list.back().iteration) {
    return {list.begin(), list.end()};
  }
  return out;
}

// A captured job against the plan of a layout (PlanConformance.h): one finding per rank that
// deviates, one per cause the job's own schedule shows; ranks that stopped (a hang) are named
// in the summary, run_status judges the hang itself.
void checkCapturedAgainstPlan(Ctx& c, CheckResult& r, const std::string& text,
                              const std::string& source) {
  const Conformance k = judgeAgainstPlan(c.run, text, source);
  if (!k.judged) {
    Finding f;
    f.message = "not judged against the plan: " + k.notJudged;
    add(r, c.opts, f);
    r.summary = "the captured job could not be judged against " + source;
    return;
  }
  for (const auto& cause : k.causes) {
    Finding f;
    f.message = "the job's own schedule differs from the plan: " + cause.line();
    add(r, c.opts, f);
  }
  std::string stopped;
  for (const auto& v : k.ranks) {
    if (v.state == RankConformance::State::Conforms) continue;
    const std::string who = "rank " + std::to_string(v.rank) + " (" + v.holds + ") ";
    if (v.state == RankConformance::State::Stopped) {
      stopped += "; " + who + v.sentence;
      continue;
    }
    Finding f;
    f.rank = v.rank;
    f.iteration = v.iteration;
    f.actionSeq = v.action;
    f.message = who + v.sentence + " (first deviation on this rank)";
    add(r, c.opts, f);
  }
  std::ostringstream s;
  s << "captured job against the plan of " << source << ": " << k.ranks.size() << " ranks, "
    << k.iterations << " iteration" << (k.iterations == 1 ? "" : "s") << ", "
    << (k.ranks.size() - static_cast<size_t>(k.deviating() + k.stopped()))
    << " following the plan to the end, " << k.deviating() << " deviating, " << k.stopped()
    << " stopped early";
  int64_t planned = 0, posted = 0;
  for (const auto& v : k.ranks) planned += v.planned, posted += v.posted;
  s << "; " << posted << " messages posted, " << planned << " planned";
  if (k.shapeMessages) {
    s << "; " << k.shapeMessages << " shape messages folded into their payloads (the job "
      << "negotiates shapes at run time, §5.1; the plan knows every shape)";
  }
  s << stopped << "; boundary broadcasts and collectives not judged against the plan";
  r.summary = s.str();
}

void checkPlanOrder(Ctx& c, CheckResult& r) {
  const auto& run = c.run;
  bool completed = run.info.status == RunStatus::Completed;
  int compared = 0, skippedLists = 0;
  if (!holdsPlan(run)) {
    if (!c.opts.planConfigText.empty()) {
      return checkCapturedAgainstPlan(c, r, c.opts.planConfigText, c.opts.planConfigSource);
    }
    if (const std::string declared = events::declaredLayoutText(run.info); !declared.empty()) {
      return checkCapturedAgainstPlan(c, r, declared, "the layout the job declared");
    }
    r.status = CheckStatus::Skipped;
    r.summary = run.info.captured()
                    ? "skipped: a captured job that declared no layout (declare_layout, or "
                      "check --plan CONFIG, judges it against the plan)"
                    : "skipped: the run file holds no plan";
    return;
  }
  size_t nRanks = std::max(run.plan.size(), run.actions.size());
  for (size_t rank = 0; rank < nRanks; ++rank) {
    static const std::vector<ActionRecord> kEmpty;
    const auto& acts = rank < run.actions.size() ? run.actions[rank] : kEmpty;
    std::set<int> iterations;
    for (size_t k = 0; k < acts.size();) {
      iterations.insert(acts[k].iteration);
      auto range = iterationRange(acts, acts[k].iteration);
      k = static_cast<size_t>(range.data() + range.size() - acts.data());
    }
    if (completed) {
      for (int i = 0; i < run.info.iterations; ++i) iterations.insert(i);
    }
    bool reported = false;
    for (int it : iterations) {
      if (reported) break;
      if (!recorded(c, static_cast<int>(rank), it)) {
        ++skippedLists;
        continue;
      }
      auto plan = plannedFor(run, static_cast<int>(rank), it);
      auto done = iterationRange(acts, it);
      if (plan.empty() && done.empty()) continue;
      ++compared;
      size_t n = std::max(plan.size(), done.size());
      for (size_t k = 0; k < n; ++k) {
        const ActionRecord* p = k < plan.size() ? &plan[k] : nullptr;
        const ActionRecord* a = k < done.size() ? &done[k] : nullptr;
        if (p && a && sameAction(*p, *a)) continue;
        if (p && !a && !completed) break;  // the run stopped here: run_status reports it
        Finding f;
        f.rank = static_cast<int>(rank);
        f.iteration = it;
        f.actionSeq = static_cast<int>(k);
        std::ostringstream m;
        m << "rank " << rank << " iteration " << it << " action #" << k << ": ";
        if (p && a) {
          f.action = toString(a->kind);
          f.microbatch = a->microbatch;
          m << "executed " << describeAction(*a) << ", plan says " << describeAction(*p);
        } else if (p) {
          f.action = toString(p->kind);
          f.microbatch = p->microbatch;
          m << "planned " << describeAction(*p) << " was never executed";
        } else {
          f.action = toString(a->kind);
          f.microbatch = a->microbatch;
          m << "executed " << describeAction(*a) << " beyond the end of the plan";
        }
        m << " (first deviation on this rank)";
        f.message = m.str();
        add(r, c.opts, f);
        reported = true;
        break;
      }
    }
  }
  r.summary = std::to_string(compared) + " (rank, iteration) action lists compared with the plan";
  if (skippedLists) {
    r.summary += "; " + std::to_string(skippedLists) + " outside the record filter (" +
                 c.opts.filter.describe() + ") skipped";
  }
  if (compared == 0 && r.status != CheckStatus::Failed) {
    r.status = CheckStatus::Skipped;
    r.summary = "skipped: no recorded action list to compare with the plan";
  }
}

// ---- message_count --------------------------------------------------------------------------
void checkCounts(Ctx& c, CheckResult& r) {
  const auto& run = c.run;
  if (run.info.status != RunStatus::Completed) {
    r.status = CheckStatus::Skipped;
    r.summary = "skipped: the run did not complete (see run_status)";
    return;
  }
  if (!holdsPlan(run)) {
    r.status = CheckStatus::Skipped;
    r.summary = run.info.captured()
                    ? "skipped: a captured job (plan_order counts its messages against a plan)"
                    : "skipped: the run file holds no plan";
    return;
  }
  // (rank, iteration) -> (planned, recorded) per direction x side (index direction * 2 + side).
  // A hash map of one entry per rank and iteration: a std::map lookup per planned message cost
  // a tenth of a 10^7-event check.
  using Counts = std::array<std::pair<int64_t, int64_t>, 4>;
  auto keyOf = [](int rank, int it) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 32) | static_cast<uint32_t>(it);
  };
  std::unordered_map<uint64_t, Counts> counts;
  int iterations = run.info.iterations;
  for (const auto& a : run.actions) {
    if (!a.empty()) iterations = std::max(iterations, a.back().iteration + 1);
  }
  int64_t skippedActions = 0;
  for (size_t rank = 0; rank < run.plan.size(); ++rank) {
    for (int it = 0; it < iterations; ++it) {
      if (!recorded(c, static_cast<int>(rank), it)) {
        skippedActions += static_cast<int64_t>(plannedFor(run, static_cast<int>(rank), it).size());
        continue;
      }
      std::array<int64_t, 4> planned{};
      for (const auto& pa : plannedFor(run, static_cast<int>(rank), it)) {
        // One rule for what a planned action implies (Coverage.h's messagesOf).
        const PlannedMessages m = messagesOf(pa);
        planned[2 * static_cast<int>(Direction::Activation) + static_cast<int>(Side::Send)] +=
            m.activationSends;
        planned[2 * static_cast<int>(Direction::Activation) + static_cast<int>(Side::Recv)] +=
            m.activationRecvs;
        planned[2 * static_cast<int>(Direction::Gradient) + static_cast<int>(Side::Send)] +=
            m.gradientSends;
        planned[2 * static_cast<int>(Direction::Gradient) + static_cast<int>(Side::Recv)] +=
            m.gradientRecvs;
      }
      if (planned == std::array<int64_t, 4>{}) continue;
      Counts& k = counts[keyOf(static_cast<int>(rank), it)];
      for (size_t x = 0; x < 4; ++x) k[x].first += planned[x];
    }
  }
  for (const auto& t : run.transfers) {
    if (!recorded(c, t.rank, t.iteration)) continue;  // outside the filter: not judged
    counts[keyOf(t.rank, t.iteration)]
          [2 * static_cast<size_t>(t.direction) + static_cast<size_t>(t.side)]
              .second++;
  }
  // In (rank, iteration, direction, side) order: the first mismatch of each rank is named.
  std::vector<std::tuple<int, int, int, int, std::pair<int64_t, int64_t>>> ordered;
  ordered.reserve(counts.size() * 4);
  for (const auto& [key, v] : counts)
    for (int x = 0; x < 4; ++x)
      ordered.emplace_back(static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xffffffffu),
                           x / 2, x % 2, v[static_cast<size_t>(x)]);
  std::sort(ordered.begin(), ordered.end());
  std::set<int> reportedRanks;
  int64_t planned = 0, recorded = 0;
  for (const auto& [rank, it, dir, side, v] : ordered) {
    planned += v.first;
    recorded += v.second;
    if (v.first == v.second) continue;
    if (reportedRanks.count(rank)) {
      ++r.total;
      continue;
    }
    reportedRanks.insert(rank);
    Finding f;
    f.rank = rank;
    f.iteration = it;
    f.direction = toString(static_cast<Direction>(dir));
    std::ostringstream m;
    m << "rank " << rank << " iteration " << it << ": " << v.second << " "
      << toString(static_cast<Direction>(dir)) << " "
      << (static_cast<Side>(side) == Side::Send ? "sends" : "receives")
      << " recorded, the plan implies " << v.first << " (first mismatch on this rank)";
    f.message = m.str();
    add(r, c.opts, f);
  }
  r.summary =
      std::to_string(recorded) + " messages recorded, " + std::to_string(planned) + " planned";
  if (skippedActions) {
    r.summary += "; " + std::to_string(skippedActions) + " planned actions outside the record " +
                 "filter (" + c.opts.filter.describe() + ") skipped";
  }
  if (planned == 0 && recorded == 0 && r.status != CheckStatus::Failed) {
    r.status = CheckStatus::Skipped;
    r.summary = "skipped: the plan implies no messages within what was recorded";
  }
}

// ---- nonfinite ------------------------------------------------------------------------------
void checkNonFinite(Ctx& c, CheckResult& r) {
  const auto& run = c.run;
  const int64_t scanned =
      static_cast<int64_t>(run.transfers.size() + run.gradients.size() + run.losses.size());
  if (scanned == 0) {
    r.status = CheckStatus::Skipped;
    r.summary = "skipped: nothing recorded to scan (no transfers, gradients or losses)";
    return;
  }
  r.summary = std::to_string(scanned) + " tensors scanned";
  if (run.info.level < events::RecordLevel::Stats) {
    r.summary += " (losses only: level " + std::string(toString(run.info.level)) +
                 " records no tensor statistics)";
  }
  // A handled overflow (LossScale.h: every module skipped the step a module found Inf/NaN in)
  // is an event: its module's gradients of that iteration are reported, not counted.
  const LossScaleReport scales = judgeLossScales(run);
  std::vector<NonFiniteRecord> records;
  int64_t handled = 0;
  for (const auto& nf : nonFiniteInCausalOrder(run)) {
    if (nf.kind == NonFiniteRecord::Kind::Gradient &&
        scales.handledOverflow(nf.iteration, run.gradients[nf.index].module.str())) {
      ++handled;
      continue;
    }
    records.push_back(nf);
  }
  if (handled) {
    std::ostringstream e;
    e << "; " << handled << " non-finite gradient" << (handled == 1 ? "" : "s")
      << " of a handled overflow not counted (an event, not a failure:";
    const char* sep = " ";
    for (const auto& o : scales.overflows) {
      e << sep << "iteration " << o.iteration << ", ";
      for (size_t i = 0; i < o.modules.size(); ++i) e << (i ? " and " : "") << o.modules[i];
      e << " found Inf/NaN and every module skipped the step";
      sep = "; ";
    }
    e << ")";
    r.summary += e.str();
  }
  for (size_t k = 0; k < records.size(); ++k) {
    const auto& nf = records[k];
    Finding f;
    std::ostringstream m;
    switch (nf.kind) {
      case NonFiniteRecord::Kind::Transfer: {
        const auto& t = run.transfers[nf.index];
        f = transferFinding(t);
        int64_t ai = findAction(run, t.rank, t.iteration, t.actionSeq);
        f.action = ai >= 0 ? toString(run.actions[t.rank][ai].kind) : toString(t.side);
        m << t.stats.nanCount << " NaN / " << t.stats.infCount << " Inf in transfer "
          << describeTransfer(t) << " at the " << toString(t.side) << " on rank " << t.rank
          << " (action #" << t.actionSeq << " " << f.action << ")";
        break;
      }
      case NonFiniteRecord::Kind::Gradient: {
        const auto& g = run.gradients[nf.index];
        f.rank = g.rank;
        f.iteration = g.iteration;
        f.microbatch = g.microbatch;
        f.tensor = g.param;
        f.action = g.phase == events::GradPhase::Accumulated ? "B"
                   : g.phase == events::GradPhase::Reduced   ? "DP_REDUCE"
                                                             : "OPT";
        m << "non-finite " << toString(g.phase) << " gradient of " << g.param << " on rank "
          << g.rank << " (tp" << g.tp << " pp" << g.pp << " dp" << g.dp << ") iteration "
          << g.iteration;
        if (g.microbatch >= 0) m << " microbatch " << g.microbatch;
        m << ": " << g.stats.nanCount << " NaN / " << g.stats.infCount << " Inf, norm " << g.norm;
        break;
      }
      case NonFiniteRecord::Kind::Loss: {
        const auto& l = run.losses[nf.index];
        f.rank = l.rank;
        f.iteration = l.iteration;
        f.microbatch = l.microbatch;
        f.action = "F";
        f.tensor = "loss";
        m << "non-finite loss " << l.loss << " on rank " << l.rank << " iteration " << l.iteration
          << " microbatch " << l.microbatch;
        break;
      }
    }
    f.message = m.str();
    if (k == 0) {
      f.message = "first NaN/Inf in causal order: " + f.message;
      if (records.size() > 1) {
        f.message +=
            " (" + std::to_string(records.size() - 1) + " later non-finite tensors follow)";
      }
    }
    add(r, c.opts, std::move(f));
  }
}

// ---- reference_gradient ---------------------------------------------------------------------
// Whether the [record] filter explains the TP shards missing from gathered gradient `g`: every
// TP index no recorded shard came from belongs to a rank of g's module the filter left out.
bool shardsFiltered(const Ctx& c, const GatheredGradient& g) {
  if (!c.opts.filter.any()) return false;
  std::set<int> recorded, filteredOut, all;
  for (int64_t i : g.records) {
    const auto* ri = c.run.rankInfo(c.run.gradients[static_cast<size_t>(i)].rank, g.module);
    if (ri) recorded.insert(ri->tp);
  }
  for (const auto& ri : c.run.ranks) {
    if (ri.module != g.module) continue;
    all.insert(ri.tp);
    if (!c.opts.filter.wantsRankOf(c.run, g.iteration, ri.rank)) filteredOut.insert(ri.tp);
  }
  return std::all_of(all.begin(), all.end(),
                     [&](int tp) { return recorded.count(tp) || filteredOut.count(tp); });
}

// A recorded parameter after the step that the configured optimizer does not give
// (OptimizerStep.h).
void addStepFinding(Ctx& c, CheckResult& r, const StepMismatch& m, const std::string& optimizer) {
  Finding f;
  f.iteration = m.iteration;
  f.tensor = m.param;
  std::ostringstream o;
  o.precision(9);
  o << "parameter " << m.param << " after the step of iteration " << m.iteration
    << " is not the configured optimizer's step (" << optimizer
    << ") from the run's own parameters and reduced gradient: element " << m.element << " is "
    << m.got << ", expected " << m.expected << " (|difference| " << std::fabs(m.got - m.expected)
    << " > bound " << m.bound << "); " << m.outside << " element" << (m.outside == 1 ? "" : "s")
    << " outside their bound";
  f.message = o.str();
  add(r, c.opts, f);
}

// The closest passing distance / bound of each rule of reference_gradient: the margin left.
struct Margins {
  double l2 = 0, element = 0, scale = 0;
  int elementJudged = 0, scaleJudged = 0;
};

// A gradient within the relative L2 bound, judged element-wise (float32, from the run's own
// parameters; Tolerance.h, elementDistance); a finding when one element is off.  `bound` < 0:
// not judged (ToleranceRule::elementBound).
void checkElements(Ctx& c, CheckResult& r, const GatheredGradient& g, const GatheredGradient& ref,
                   double floor, double bound, Margins& margins) {
  if (bound < 0) return;
  ++margins.elementJudged;
  const ElementDistance e = elementDistance(g.values, ref.values, floor);
  if (e.ratio <= bound) {
    margins.element = std::max(margins.element, e.ratio / bound);
    return;
  }
  Finding f;
  f.iteration = ref.iteration;
  f.tensor = ref.param;
  std::ostringstream m;
  m.precision(9);
  m << "gradient of " << ref.param << " iteration " << ref.iteration
    << " differs from the reference element-wise: element " << e.worst << " is "
    << g.values[e.worst] << ", the reference's " << ref.values[e.worst] << " (|difference| "
    << std::fabs(g.values[e.worst] - ref.values[e.worst]);
  m.precision(3);
  m << " = " << e.ratio << " x its scale " << e.scale << " > " << bound
    << "; scale: max(|element|, the tensor's RMS, the floor))";
  f.message = m.str();
  add(r, c.opts, f);
}

// A low-precision gradient within the relative L2 bound, judged by its scale against the truth
// (Tolerance.h, scaleDeviation); `spread`: the relative L2 of the reference's own run-dtype
// computation from the truth (< 0: none, not judged).
void checkScale(Ctx& c, CheckResult& r, const ToleranceRule& rule, const GatheredGradient& g,
                const GatheredGradient& ref, double spread, double floor, Margins& margins) {
  const double bound = rule.scaleBound(spread);
  if (bound < 0) return;
  ++margins.scaleJudged;
  const double s = scaleDeviation(g.values, ref.values, floor);
  if (std::fabs(s) <= bound) {
    margins.scale = std::max(margins.scale, std::fabs(s) / bound);
    return;
  }
  Finding f;
  f.iteration = ref.iteration;
  f.tensor = ref.param;
  std::ostringstream m;
  m.precision(3);
  m << "gradient of " << ref.param << " iteration " << ref.iteration << " is the reference's x "
    << 1 + s << " along it (scale deviation " << s << ", |" << s << "| > " << bound << " = max("
    << ToleranceRule::kScaleBase << ", " << ToleranceRule::kScaleFactor << " x " << spread
    << ", the relative L2 of the reference's own " << g.dtype << " computation))";
  f.message = m.str();
  add(r, c.opts, f);
}

// The summary fragment of the element and scale rules: what they judged, the margin left.
std::string elementAndScaleSummary(const Margins& m) {
  std::ostringstream s;
  s.precision(2);
  if (m.elementJudged)
    s << "; " << m.elementJudged << " of them also element-wise (each element within "
      << ToleranceRule::kElementBound
      << " x max(|element|, the tensor's RMS, the floor); the closest at " << m.element
      << " of it)";
  if (m.scaleJudged)
    s << "; " << m.scaleJudged << " of them also by their scale along the reference (within max("
      << ToleranceRule::kScaleBase << ", " << ToleranceRule::kScaleFactor
      << " x the relative L2 of the reference's own computation)); the closest at " << m.scale
      << " of it)";
  return s.str();
}

// Every recorded loss (each TP copy) against the reference's loss of the same (iteration,
// microbatch, dp), by the loss bound of the tolerance rule (lossDistance, as compare judges).
// Iterations on the reference's own float32 trajectory (`trajectory`: no restart from the run's
// parameters) are not judged: round-off has grown there and the float64 twin keeps no losses.
// Returns the summary fragment.
std::string checkLossesAgainstReference(Ctx& c, CheckResult& r, const ToleranceRule& rule,
                                        const std::set<int>& trajectory) {
  std::map<std::tuple<int, int, int>, double> reference;
  for (const auto& l : c.run.referenceLosses)
    reference.emplace(std::make_tuple(l.iteration, l.microbatch, l.dp), l.loss);
  int judged = 0, onTrajectory = 0;
  double worst = 0;
  for (const auto& l : c.run.losses) {
    if (l.rank < 0) continue;
    const auto ref = reference.find(std::make_tuple(l.iteration, l.microbatch, l.dp));
    if (ref == reference.end()) continue;  // the reference computes no such loss
    if (trajectory.count(l.iteration)) {
      ++onTrajectory;
      continue;
    }
    ++judged;
    const double a = l.loss, b = ref->second;
    const double rel = lossDistance(a, b);
    const double bound = rule.bound(ValueKind::Loss, l.iteration);
    if (rel <= bound) {
      worst = std::max(worst, rel);
      continue;
    }
    Finding f;
    f.rank = l.rank;
    f.iteration = l.iteration;
    f.microbatch = l.microbatch;
    f.tensor = "loss";
    std::ostringstream m;
    m.precision(9);
    m << "loss of iteration " << l.iteration
      << (l.microbatch < 0 ? " (iteration mean)" : " microbatch " + std::to_string(l.microbatch))
      << " dp" << l.dp << " on rank " << l.rank << " is " << a << ", the reference's " << b
      << " (relative " << rel << " > " << bound << ")";
    f.message = m.str();
    add(r, c.opts, f);
  }
  std::ostringstream s;
  s.precision(3);
  if (judged)
    s << "; " << judged << " losses compared with the reference's (worst passing relative " << worst
      << ")";
  if (onTrajectory)
    s << "; " << onTrajectory << " losses of iterations on the reference's own trajectory not "
      << "judged (level full restarts each iteration from the run's parameters)";
  return s.str();
}

// A run without reference gradients (nothing trained): a forward-only run's reference computes
// losses only; judged when the run's dtype (which picks the bound) is on record.
void checkReferenceLossesOnly(Ctx& c, CheckResult& r) {
  const std::string dtype = computeDtypeOf(c.run);
  const bool judge = !c.run.referenceLosses.empty() && (!dtype.empty() || c.opts.tolerance >= 0);
  const std::string losses =
      judge ? checkLossesAgainstReference(c, r, toleranceFor(dtype, c.opts.tolerance), {}) : "";
  r.summary = "no reference gradients (nothing trained)" + losses;
  if (!c.run.referenceLosses.empty() && !judge) {
    r.status = CheckStatus::Skipped;
    r.summary =
        "skipped: the reference's losses are not judged: no gradient or message records "
        "the run's compute dtype, which picks the bound (--tol gives one)";
  } else if (losses.empty()) {
    r.status = CheckStatus::Skipped;
    r.summary = c.run.info.captured()
                    ? "skipped: a captured job has no single-process reference (its gradients "
                      "are judged by the run's own records)"
                    : "skipped: no reference gradients recorded (run with --reference)";
  }
}

using GradientKey = std::pair<int, std::string>;  // (iteration, parameter)

// What the steps of checkReference share: the reference's gradients and the run's reduced ones,
// indexed by (iteration, parameter), the rule that bounds them, and the tallies the summary
// reports.  Holds pointers into its own vectors: built in place, never copied.
struct ReferenceComparison {
  std::vector<GatheredGradient> refs, got;
  std::map<GradientKey, const GatheredGradient*> byKey;  // into got
  std::map<int, double> modelNorm;  // by iteration: the sum of the squared gradient norms
  std::string dtype;
  ToleranceRule rule;
  // A low-precision run's reference also computed each gradient in the run's dtype: its distance
  // from the truth scales that gradient's bound (Tolerance.h, lowPrecisionGradientBound).
  std::map<GradientKey, const GatheredGradient*> inDtype;  // into inDtypeRefs
  std::vector<GatheredGradient> inDtypeRefs;
  // float32: the iterations whose reference did not restart from the run's parameters (its
  // own trajectory, with a float64 twin): neither the element rule nor the losses judge them.
  std::set<int> trajectory;
  int compared = 0, byValues = 0, byNorms = 0, skipped = 0;
  int loose = 0;  // bound scaled to 1/3 or more: an error of 1.5x would pass there
  Margins margins;
};

// Fills everything of `j` but the tallies, from its reference gradients (`j.refs`, not empty).
void indexReferenceComparison(Ctx& c, ReferenceComparison& j) {
  j.got = gatherGradients(c.run, events::GradPhase::Reduced, true);
  for (const auto& g : j.got) {
    j.byKey[{g.iteration, g.param}] = &g;
    if (std::isfinite(g.norm)) j.modelNorm[g.iteration] += g.norm * g.norm;
  }
  j.dtype = j.got.empty() ? j.refs.front().dtype : j.got.front().dtype;
  j.rule = toleranceFor(j.dtype, c.opts.tolerance);
  if (c.opts.tolerance < 0) j.inDtypeRefs = gatherReferenceSecondComputation(c.run, true);
  for (const auto& g : j.inDtypeRefs) j.inDtype[{g.iteration, g.param}] = &g;
  if (!j.rule.lowPrecision)
    for (const auto& g : j.inDtypeRefs) j.trajectory.insert(g.iteration);
}

// Whether the record filter explains a reference gradient the run did not record at all: it
// left out a rank of the module (the ranks of the parameter's own stage are not known here; a
// kept rank's stage records every parameter of it, so when every rank was kept nothing may be
// missing).
bool missingByFilter(const Ctx& c, const GatheredGradient& ref) {
  return c.opts.filter.any() &&
         std::any_of(c.run.ranks.begin(), c.run.ranks.end(), [&](const auto& ri) {
           return ri.module == ref.module &&
                  !c.opts.filter.wantsRankOf(c.run, ref.iteration, ri.rank);
         });
}

// One gradient's relative bound: the rule's, or, where the reference's own run-dtype computation
// is on record, scaled by that computation's relative L2 from the truth (`dtypeRel`, -1: none).
struct GradientBound {
  double tol;
  double dtypeRel;
};

GradientBound gradientBound(ReferenceComparison& j, const GatheredGradient& ref, double floor) {
  double tol = j.rule.bound(ValueKind::Gradient, ref.iteration);
  double dtypeRel = -1;  // the reference's own run-dtype computation from the truth
  const auto lowIt = j.inDtype.find({ref.iteration, ref.param});
  const GatheredGradient* low = lowIt != j.inDtype.end() ? lowIt->second : nullptr;
  if (low && low->hasValues && ref.hasValues) {
    dtypeRel = valueDistance(low->values, ref.values, floor).rel;
    tol = j.rule.scaledGradientBound(ref.iteration, dtypeRel);
    if (tol >= 1.0 / 3) ++j.loose;
  }
  return {tol, dtypeRel};
}

// Why the bound is what it is, when the run-dtype computation set it.
void boundReason(std::ostream& o, const ReferenceComparison& j, const GradientBound& b) {
  if (b.dtypeRel >= 0 && b.tol == j.rule.deviationFactor() * b.dtypeRel) {
    o << " (the bound is " << j.rule.deviationFactor() << " x " << b.dtypeRel
      << ", the relative L2 of the reference's own "
      << (j.rule.lowPrecision ? j.dtype + " computation)"
                              : "float32 trajectory from its float64 one)");
  }
}

// A complete gradient with payloads on both sides, by values: the relative L2, then the element
// and scale rules.  `f` and `m` (precision 6) are the finding and message begun for it.
void judgeByValues(Ctx& c, CheckResult& r, ReferenceComparison& j, const GatheredGradient& g,
                   const GatheredGradient& ref, double floor, const GradientBound& b, Finding& f,
                   std::ostringstream& m) {
  ++j.byValues;
  const ValueDistance d = valueDistance(g.values, ref.values, floor);
  if (!(d.rel <= b.tol)) {
    m << "gradient of " << ref.param << " iteration " << ref.iteration
      << " differs from the reference by values: relative L2 " << d.rel << " > " << b.tol;
    boundReason(m, j, b);
    if (d.worst >= 0 && static_cast<size_t>(d.worst) < g.values.size()) {
      m << "; largest difference at element " << d.worst << ": " << g.values[d.worst]
        << " vs reference " << ref.values[d.worst];
    }
    f.message = m.str();
    add(r, c.opts, f);
    return;
  }
  if (b.tol > 0) j.margins.l2 = std::max(j.margins.l2, d.rel / b.tol);
  checkElements(c, r, g, ref, floor, j.rule.elementBound(!j.trajectory.count(ref.iteration)),
                j.margins);
  checkScale(c, r, j.rule, g, ref, b.dtypeRel, floor, j.margins);
}

// A complete gradient without payloads: the fallback, by norms.  `f` and `m` as judgeByValues.
void judgeByNorms(Ctx& c, CheckResult& r, ReferenceComparison& j, const GatheredGradient& g,
                  const GatheredGradient& ref, double floor, const GradientBound& b, Finding& f,
                  std::ostringstream& m) {
  ++j.byNorms;
  const double den = std::max({std::fabs(g.norm), std::fabs(ref.norm), floor});
  const double rel = g.norm == ref.norm ? 0 : den > 0 ? std::fabs(g.norm - ref.norm) / den : 0;
  if (!(rel <= b.tol)) {
    m << "gradient norm of " << ref.param << " iteration " << ref.iteration << " is " << g.norm
      << " (gathered from " << g.shards << " shard" << (g.shards == 1 ? "" : "s") << "), reference "
      << ref.norm << " (relative " << rel << " > " << b.tol
      << "; evidence: norms, the fallback without payloads)";
    boundReason(m, j, b);
    f.message = m.str();
    add(r, c.opts, f);
  } else if (b.tol > 0) {
    j.margins.l2 = std::max(j.margins.l2, rel / b.tol);
  }
}

// One reference gradient against the run's reduced gradient of the same (iteration, parameter):
// a finding when it is missing, partial or past its bound; else the margin it leaves.
void judgeReferenceGradient(Ctx& c, CheckResult& r, ReferenceComparison& j,
                            const GatheredGradient& ref) {
  Finding f;
  f.iteration = ref.iteration;
  f.tensor = ref.param;
  auto it = j.byKey.find({ref.iteration, ref.param});
  if (it == j.byKey.end()) {
    if (missingByFilter(c, ref)) {
      ++j.skipped;
      return;
    }
    f.message = "no reduced gradient of " + ref.param + " in iteration " +
                std::to_string(ref.iteration) + " (the reference has one)";
    add(r, c.opts, f);
    return;
  }
  const auto& g = *it->second;
  if (!g.complete && shardsFiltered(c, g)) {
    ++j.skipped;
    return;
  }
  ++j.compared;
  std::ostringstream m;
  m.precision(6);
  if (!g.complete) {
    m << "gradient of " << ref.param << " iteration " << ref.iteration
      << ": TP shards do not cover the full tensor (" << g.layout << ")";
    f.message = m.str();
    add(r, c.opts, f);
    return;
  }
  const double floor = j.rule.floorRel * std::sqrt(j.modelNorm[ref.iteration]);
  const GradientBound b = gradientBound(j, ref, floor);
  if (g.hasValues && ref.hasValues) {
    judgeByValues(c, r, j, g, ref, floor, b, f, m);
    return;
  }
  judgeByNorms(c, r, j, g, ref, floor, b, f, m);
}

// The summary's account of the gradients compared: how, the margin left, the rule.
void describeGradientComparison(const Ctx& c, const ReferenceComparison& j, std::ostream& s) {
  s << j.compared << " parameter gradients compared with the reference (" << j.byValues
    << " by values, " << j.byNorms << " by norms (fallback: no payloads))";
  if (j.byValues + j.byNorms > 0) {
    std::ostringstream w;
    w.precision(2);
    w << j.margins.l2;
    s << ", the closest passing one at " << w.str() << " of its bound";
  }
  s << elementAndScaleSummary(j.margins);
  s << "; rule (" << j.rule.describe() << ")";  // one clause: the rule has "; " of its own
  if (!j.inDtype.empty() && c.opts.tolerance < 0 && j.rule.lowPrecision) {
    s << "; gradients with the reference's own " << j.dtype << " computation: max("
      << ToleranceRule::kDtypeDeviationBase << ", " << ToleranceRule::kDtypeDeviationFactor
      << " x its relative L2 from float32)";
  } else if (!j.inDtype.empty() && c.opts.tolerance < 0) {
    s << "; gradients of iterations on the reference's own trajectory: max(the bound, "
      << j.rule.deviationFactor()
      << " x the relative L2 of its float32 trajectory from its float64 one)";
  }
  if (j.loose)
    s << "; " << j.loose << " of them with a bound of 1/3 or more (round-off alone moved them "
      << "that far: only an error of 1.5x or more fails there)";
  if (j.skipped) s << "; " << j.skipped << " not recorded by the record filter (skipped)";
}

// The summary's account of the optimizer steps recomputed (OptimizerStep.h).
void describeOptimizerSteps(const StepJudgement& steps, std::ostream& s) {
  if (steps.judged) {
    s << "; " << steps.steps << " optimizer steps (" << steps.optimizer
      << ") recomputed from the run's own parameters and reduced gradients";
    if (steps.notJudged) s << " (" << steps.notJudged << " not: inputs or state not in the file)";
  } else if (steps.notJudged) {
    s << "; " << steps.notJudged
      << " optimizer steps not judged (their inputs or state are not in the file)";
  }
}

// A bfloat16 run's reference exists only for the iterations whose starting parameters the file
// holds (app/ReferenceRecord.h): the others are named, never passed silently.  Empty when every
// iteration with a reduced gradient has a reference.
std::string notComparedIterations(const ReferenceComparison& j) {
  std::set<int> referenced, unreferenced;
  for (const auto& ref : j.refs) referenced.insert(ref.iteration);
  for (const auto& g : j.got) {
    if (!referenced.count(g.iteration)) unreferenced.insert(g.iteration);
  }
  std::ostringstream notCompared;
  if (!unreferenced.empty()) {
    notCompared << "not compared: iteration";
    if (unreferenced.size() > 1) notCompared << "s";
    const char* sep = " ";
    for (int it : unreferenced) {
      notCompared << sep << it;
      sep = ", ";
    }
    notCompared << " (no reference: it starts from the run's recorded parameters, which this "
                   "file does not hold)";
  }
  return notCompared.str();
}

// reference_gradient: every reference gradient against the run's reduced one, then the losses
// against the reference's and the optimizer steps recomputed.
void checkReference(Ctx& c, CheckResult& r) {
  ReferenceComparison j;
  j.refs = gatherGradients(c.run, events::GradPhase::Reference, true);
  if (j.refs.empty()) {
    checkReferenceLossesOnly(c, r);
    return;
  }
  indexReferenceComparison(c, j);
  for (const auto& ref : j.refs) judgeReferenceGradient(c, r, j, ref);
  const std::string losses = checkLossesAgainstReference(c, r, j.rule, j.trajectory);
  const StepJudgement steps = judgeOptimizerSteps(c.run);
  for (const auto& m : steps.mismatches) addStepFinding(c, r, m, steps.optimizer);
  std::ostringstream s;
  describeGradientComparison(c, j, s);
  s << losses;
  describeOptimizerSteps(steps, s);
  const std::string notCompared = notComparedIterations(j);
  if (!notCompared.empty()) s << "; " << notCompared;
  r.summary = s.str();
  if (j.compared == 0 && r.status != CheckStatus::Failed) {
    r.status = CheckStatus::Skipped;
    r.summary = notCompared.empty()
                    ? "skipped: no reduced gradient recorded to compare with the reference"
                    : "skipped: " + notCompared;
  }
}

// ---- against --------------------------------------------------------------------------------
void checkAgainst(Ctx& c, CheckResult& r) {
  if (!c.opts.against) {
    r.status = CheckStatus::Skipped;
    r.summary = "skipped: no --against run given";
    return;
  }
  CompareOptions co;
  co.tolerance = c.opts.tolerance;
  co.labelA = "this run";
  co.labelB = "the --against run";
  co.filterA = c.opts.filter;
  co.filterB = c.opts.againstFilter;
  Comparison cmp = compareRuns(c.run, *c.opts.against, co);
  r.summary = std::string(c.opts.againstBitwise ? "bitwise" : "tolerance") +
              " comparison with run " + c.opts.against->info.runId + ": " + toString(cmp.verdict) +
              "; " + cmp.evidence;
  const bool fail = c.opts.againstBitwise
                        ? cmp.verdict != Verdict::Identical
                        : (cmp.verdict == Verdict::Diverged || cmp.verdict == Verdict::Incomplete);
  if (!fail) return;
  Finding f;
  if (cmp.first) {
    const auto& d = *cmp.first;
    f.iteration = d.iteration;
    f.microbatch = d.microbatch;
    if (d.kind == ItemKind::Transfer) {
      f.edge = d.edge;
      f.direction = toString(d.direction);
      if (d.a >= 0) {
        f.rank = c.run.transfers[d.a].srcRank;
        f.peerRank = c.run.transfers[d.a].dstRank;
      }
      f.tensor = "transfer " + d.edge + " " + toString(d.direction);
    } else {
      f.tensor = d.kind == ItemKind::Loss ? "loss" : d.param;
    }
  }
  f.message = std::string(toString(cmp.verdict)) + ": " + cmp.verdictReason;
  add(r, c.opts, f);
}

// ---- reference_gradient, third part: the reduction of the accumulated gradients -------------
// The run's own reduced gradients against what its replicas accumulated (Accumulation.h): a
// consistency of the run's gradients, judged like its optimizer step without the reference.
void checkAccumulation(Ctx& c, CheckResult& r) {
  const std::string dtype = computeDtypeOf(c.run);
  const AccumulationReport rep =
      judgeAccumulation(c.run, toleranceFor(dtype.empty() ? "float32" : dtype, c.opts.tolerance));
  for (const auto& m : rep.mismatches) {
    Finding f;
    f.rank = m.rank;
    f.iteration = m.iteration;
    f.tensor = m.param;
    f.message = m.sentence;
    add(r, c.opts, f);
  }
  if (rep.judged == 0 && rep.unjudged == 0) return;  // nothing accumulated
  if (r.status == CheckStatus::Skipped) {
    r.status = rep.mismatches.empty() ? CheckStatus::Passed : CheckStatus::Failed;
    r.summary = rep.summary() + "; " + r.summary;
  } else {
    r.summary += "; " + rep.summary();
  }
}

// ---- reference_gradient, fifth and sixth parts: a captured job's numbers, without a twin -------
// The gradient audit (GradientAudit.h: each module's reduction against what the language
// model's loss normalisation implies, with the cause of a difference) and one loss scale for
// the whole model (LossScale.h).  Both judge rows only a captured job's helpers write.
// `wasSkipped`: the class's status before this part added its findings.
void addPart(CheckResult& r, bool wasSkipped, const std::string& summary, bool failed) {
  if (summary.empty()) return;
  if (wasSkipped) {
    r.status = failed ? CheckStatus::Failed : CheckStatus::Passed;
    r.summary = summary + "; " + r.summary;
  } else {
    r.summary += "; " + summary;
    if (failed) r.status = CheckStatus::Failed;
  }
}

void checkGradientAudit(Ctx& c, CheckResult& r) {
  const std::string dtype = computeDtypeOf(c.run);
  const GradientAuditReport rep =
      auditGradients(c.run, toleranceFor(dtype.empty() ? "float32" : dtype, c.opts.tolerance));
  const bool wasSkipped = r.status == CheckStatus::Skipped;
  for (const auto& a : rep.findings) {
    Finding f;
    f.rank = a.rank;
    f.iteration = a.iteration;
    f.tensor = a.param.empty() ? a.module : a.param;
    f.message = "gradient audit: " + a.sentence;
    add(r, c.opts, f);
  }
  if (rep.judged == 0 && rep.notJudged == 0 && rep.notes.empty()) return;  // nothing recorded
  addPart(r, wasSkipped, rep.summary(), !rep.findings.empty());
}

void checkLossScale(Ctx& c, CheckResult& r) {
  const LossScaleReport rep = judgeLossScales(c.run);
  const bool wasSkipped = r.status == CheckStatus::Skipped;
  for (const auto& x : rep.findings) {
    Finding f;
    f.rank = x.rank;
    f.iteration = x.iteration;
    f.tensor = "loss scale of " + x.module;
    f.message = "loss scale: " + x.sentence;
    add(r, c.opts, f);
  }
  addPart(r, wasSkipped, rep.summary(), !rep.findings.empty());
}

// ---- reference_gradient, fourth part: the inputs against the samples the layout assigns ------
// Each recorded input row must hold the samples its replica is assigned, with the values the
// seed draws for them (Inputs.h): the data every gradient above was computed from.
void checkInputs(Ctx& c, CheckResult& r) {
  const InputsReport rep = judgeInputs(c.run);
  for (size_t i = 0; i < rep.mismatches.size(); ++i) {
    Finding f;
    f.rank = rep.mismatchRanks[i];
    f.iteration = rep.mismatchIterations[i];
    f.tensor = "inputs";
    f.message = rep.mismatches[i];
    add(r, c.opts, f);
  }
  if (rep.rows == 0 && rep.notJudged.empty() && rep.mismatches.empty()) return;  // none
  if (r.status == CheckStatus::Skipped) {
    r.status = rep.mismatches.empty() ? CheckStatus::Passed : CheckStatus::Failed;
    r.summary = rep.summary() + "; " + r.summary;
  } else {
    r.summary += "; " + rep.summary();
  }
}

// ---- nccl_replay ----------------------------------------------------------------------------
// A completed run's communication replayed under NCCL's rules (NcclReplay.h): a predicted hang
// fails, one finding per blocked rank; a run that stopped is judged by run_status instead.
void checkNcclReplay(const Ctx& c, CheckResult& r) {
  if (c.run.info.status != RunStatus::Completed || c.run.partial) {
    r.status = CheckStatus::Skipped;
    r.summary = "skipped: the run did not complete (see run_status)";
    return;
  }
  NcclVerdict v = ncclVerdict(c.run);
  r.summary = v.summary;
  if (v.kind == NcclVerdict::Kind::Completes || v.kind == NcclVerdict::Kind::CompletesIfBuffered) {
    return;
  }
  if (v.kind != NcclVerdict::Kind::Hangs) {
    r.status = CheckStatus::Skipped;
    return;
  }
  r.status = CheckStatus::Failed;
  r.total = static_cast<int64_t>(v.replay.blocked.size());
  for (const auto& b : v.replay.blocked) {
    Finding f;
    f.name = r.name;
    f.exitCode = r.exitCode;
    f.rank = b.rank;
    f.peerRank = b.waitsOn;
    f.action = toString(b.rule);
    f.message = "predicted on NCCL [" + std::string(toString(b.rule)) + "]: " + b.sentence;
    if (r.findings.size() < c.opts.maxFindings) r.findings.push_back(std::move(f));
  }
  if (!v.replay.fix.empty() && r.findings.size() < c.opts.maxFindings) {
    Finding f;
    f.name = r.name;
    f.exitCode = r.exitCode;
    f.message = "to complete on NCCL: " + v.replay.fix;
    r.findings.push_back(std::move(f));
  }
}

bool enabled(const CheckOptions& o, const std::string& name) {
  return o.only.empty() || std::find(o.only.begin(), o.only.end(), name) != o.only.end();
}

}  // namespace

CheckReport checkRun(const RunModel& run, const CheckOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  CheckReport rep;
  rep.runPath = run.path;
  rep.runId = run.info.runId;
  rep.status = toString(run.info.status);
  rep.live = opts.live;
  Ctx c{run, opts, {}, nullptr};
  c.pairs = &pairsOf(run, c.scratch);

  auto make = [](const char* name, int code) {
    CheckResult r;
    r.name = name;
    r.exitCode = code;
    return r;
  };
  CheckResult status = make("run_status", exit_code::kRunStatus);
  CheckResult unmatched = make("unmatched_transfer", exit_code::kUnmatchedTransfer);
  CheckResult order = make("plan_order", exit_code::kPlanOrder);
  CheckResult count = make("message_count", exit_code::kMessageCount);
  CheckResult shape = make("shape_mismatch", exit_code::kShapeMismatch);
  CheckResult checksum = make("checksum_mismatch", exit_code::kChecksumMismatch);
  CheckResult nonfinite = make("nonfinite", exit_code::kNonFinite);
  CheckResult reference = make("reference_gradient", exit_code::kReferenceGradient);
  CheckResult against = make("against", exit_code::kAgainst);
  CheckResult nccl = make("nccl_replay", exit_code::kNcclReplay);

  auto timed = [&](CheckResult& r, auto&& fn) {
    if (!enabled(opts, r.name)) {
      r.status = CheckStatus::Skipped;
      r.summary = "skipped: not selected";
      return;
    }
    auto s = std::chrono::steady_clock::now();
    fn();
    r.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
  };
  timed(status, [&] { checkStatus(c, status); });
  {
    bool any =
        enabled(opts, unmatched.name) || enabled(opts, shape.name) || enabled(opts, checksum.name);
    if (any) {
      auto s = std::chrono::steady_clock::now();
      checkPairs(c, unmatched, shape, checksum);
      if (enabled(opts, unmatched.name) && unmatched.status != CheckStatus::Skipped)
        checkRoles(c, unmatched);
      if (enabled(opts, checksum.name)) checkReplicas(c, checksum);
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
      for (CheckResult* r : {&unmatched, &shape, &checksum}) {
        r->seconds = sec / 3;
        if (!enabled(opts, r->name)) {
          *r = make(r->name.c_str(), r->exitCode);
          r->status = CheckStatus::Skipped;
          r->summary = "skipped: not selected";
        }
      }
    }
  }
  timed(order, [&] { checkPlanOrder(c, order); });
  timed(count, [&] { checkCounts(c, count); });
  timed(nonfinite, [&] { checkNonFinite(c, nonfinite); });
  timed(reference, [&] {
    checkReference(c, reference);
    checkAccumulation(c, reference);
    checkInputs(c, reference);
    checkGradientAudit(c, reference);
    checkLossScale(c, reference);
  });
  timed(against, [&] { checkAgainst(c, against); });
  timed(nccl, [&] { checkNcclReplay(c, nccl); });

  rep.checks = {status,   unmatched, order,     count,   shape,
                checksum, nonfinite, reference, against, nccl};
  for (const auto& r : rep.checks) {
    if (r.status == CheckStatus::Failed && (rep.exitCode == 0 || r.exitCode < rep.exitCode)) {
      rep.exitCode = r.exitCode;
    }
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace stagescope::analysis
