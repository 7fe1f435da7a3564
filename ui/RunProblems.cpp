#include "ui/RunProblems.h"

#include "core/analysis/Causal.h"
#include "core/analysis/HangGraph.h"
#include "core/analysis/NonFinite.h"
#include "core/analysis/Pairing.h"
#include "core/analysis/Replicas.h"
#include "core/events/CapturedLayout.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

namespace stagescope::ui {

namespace {

using events::ActionKind;

// "cycle r1 -> r2 -> r1" when `rank` is the first (lowest) rank of one of the graph's cycles.
std::string cycleLabelFrom(const analysis::WaitGraph& graph, int rank) {
  for (const auto& cycle : graph.cycles) {
    if (cycle.empty() || cycle.front() != rank) continue;
    std::string label = "cycle";
    for (int r : cycle) label += " r" + std::to_string(r) + " ->";
    return label + " r" + std::to_string(rank);
  }
  return "";
}

// Of the ranks whose fate is Killed, the one whose rank_killed record is earliest (ties and
// records without a time: the lowest rank); -1 when none was killed.
int firstKilledRank(const model::RunModel& m, const std::vector<RankProblem>& ranks) {
  int first = -1;
  int64_t firstNs = 0;
  for (const auto& d : m.diagnoses) {
    if (d.kind != events::DiagnosisKind::RankKilled || d.rank < 0 ||
        d.rank >= static_cast<int>(ranks.size()) || ranks[d.rank].fate != RankFate::Killed)
      continue;
    if (first < 0 || d.timeNs < firstNs || (d.timeNs == firstNs && d.rank < first)) {
      first = d.rank;
      firstNs = d.timeNs;
    }
  }
  for (int r = 0; first < 0 && r < static_cast<int>(ranks.size()); ++r)
    if (ranks[r].fate == RankFate::Killed) first = r;
  return first;
}

// The index in `plan` of the first planned action whose (iteration, seq) no executed action has;
// -1 when every one was executed.  Both lists come sorted by (iteration, seq) from the reader,
// so one forward walk finds it (a std::set of the executed keys cost ~1 s and 5 M nodes at
// 10^7 actions); a list that is not sorted (a model built by hand) is searched instead.
int32_t firstUnexecuted(const std::vector<events::ActionRecord>& plan,
                        const std::vector<events::ActionRecord>& done) {
  // (iteration, seq) as one integer in the same order: each int32 with its sign bit flipped.
  auto key = [](const events::ActionRecord& a) {
    return (uint64_t{static_cast<uint32_t>(a.iteration) ^ 0x80000000u} << 32) |
           (static_cast<uint32_t>(a.seq) ^ 0x80000000u);
  };
  std::vector<uint64_t> executed;
  executed.reserve(done.size());
  for (const auto& a : done) executed.push_back(key(a));
  if (!std::is_sorted(executed.begin(), executed.end()))
    std::sort(executed.begin(), executed.end());
  auto at = executed.begin();
  uint64_t last = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const uint64_t k = key(plan[i]);
    if (i == 0 || k < last)
      at = std::lower_bound(executed.begin(), executed.end(), k);  // out of order: search
    else
      while (at != executed.end() && *at < k) ++at;  // sorted: walk on
    if (at == executed.end() || *at != k) return static_cast<int32_t>(i);
    last = k;
  }
  return -1;
}

// The action on a rank that produced a record: (iteration, kind, microbatch) -> index.
// Finds the action a record belongs to, by binary search of the rank's actions (sorted by
// iteration, then seq, as the reader leaves them) and a scan of that iteration: a map entry per
// action cost 5 M nodes at 10^7 actions, built even when no record needed it.
class ActionLookup {
 public:
  explicit ActionLookup(const model::RunModel& m) : model_(m) {}
  // The last action of (kind, microbatch) of `iteration` on `rank` (microbatch -1: the
  // action's own microbatch must be -1, as for DpReduce and OptimizerStep).
  int32_t find(int rank, int iteration, ActionKind kind, int microbatch) const {
    return last(rank, iteration, [&](const events::ActionRecord& a) {
      return a.kind == kind && a.microbatch == microbatch;
    });
  }
  // The last forward of `iteration` on `rank` (for an iteration's mean loss).
  int32_t lastForward(int rank, int iteration) const {
    return last(rank, iteration,
                [](const events::ActionRecord& a) { return a.kind == ActionKind::Forward; });
  }

 private:
  template <typename Match>
  int32_t last(int rank, int iteration, Match match) const {
    if (rank < 0 || rank >= static_cast<int>(model_.actions.size())) return -1;
    const auto& acts = model_.actions[rank];
    const auto range = analysis::iterationRange(acts, iteration);
    int32_t best = -1;
    for (const auto& a : range)
      if (match(a)) best = static_cast<int32_t>(&a - acts.data());
    return best;
  }

  const model::RunModel& model_;
};

}  // namespace

std::vector<NonFinite> nonFiniteInCausalOrder(const model::RunModel& m, const ReplayOrder& replay) {
  // The list and its order are core/analysis's (what `check` names first); the action found
  // here only tells the viewer where to navigate.
  ActionLookup lookup(m);
  const int world = static_cast<int>(m.actions.size());
  std::vector<NonFinite> out;
  for (const analysis::NonFiniteRecord& r : analysis::nonFiniteInCausalOrder(m)) {
    NonFinite n;
    n.index = r.index;
    n.rank = r.rank;
    switch (r.kind) {
      case analysis::NonFiniteRecord::Kind::Transfer: {
        const auto& t = m.transfers[r.index];
        n.kind = NonFinite::Kind::Transfer;
        n.rank = t.rank;
        n.action =
            t.rank >= 0 && t.rank < world
                ? static_cast<int32_t>(analysis::findAction(m, t.rank, t.iteration, t.actionSeq))
                : -1;
        break;
      }
      case analysis::NonFiniteRecord::Kind::Gradient: {
        const auto& g = m.gradients[r.index];
        n.kind = NonFinite::Kind::Gradient;
        if (g.phase == events::GradPhase::Accumulated)
          n.action = lookup.find(g.rank, g.iteration, ActionKind::Backward, g.microbatch);
        else if (g.phase == events::GradPhase::Reduced)
          n.action = lookup.find(g.rank, g.iteration, ActionKind::DpReduce, -1);
        else if (g.phase == events::GradPhase::ParamAfterStep)
          n.action = lookup.find(g.rank, g.iteration, ActionKind::OptimizerStep, -1);
        break;
      }
      case analysis::NonFiniteRecord::Kind::Loss: {
        const auto& l = m.losses[r.index];
        n.kind = NonFinite::Kind::Loss;
        n.action = l.microbatch >= 0
                       ? lookup.find(l.rank, l.iteration, ActionKind::Forward, l.microbatch)
                       : lookup.lastForward(l.rank, l.iteration);
        break;
      }
    }
    if (n.rank >= 0 && n.rank < world && n.action >= 0)
      n.causalPosition = replay.positionOf(n.rank, n.action, true);
    out.push_back(n);
  }
  return out;
}

namespace {

// Each rank's fate: completed when it executed its whole plan; otherwise the strongest of its
// own records and the launcher's record of how its process ended, or why none exists.
void judgeFates(const model::RunModel& m, RunProblems& out) {
  const int world = static_cast<int>(out.ranks.size());
  for (int r = 0; r < world; ++r) {
    RankProblem& p = out.ranks[r];
    const auto* plan = r < static_cast<int>(m.plan.size()) ? &m.plan[r] : nullptr;
    p.stuckPlan = plan ? firstUnexecuted(*plan, m.actions[r]) : -1;
    const bool complete =
        plan && !plan->empty() ? p.stuckPlan < 0 : m.info.status == events::RunStatus::Completed;
    p.fate = complete ? RankFate::Completed : RankFate::Unfinished;
  }
  for (int r = 0; r < world; ++r) {
    if (const events::DiagnosisRecord* d = analysis::decidingRecord(m.diagnoses, r)) {
      out.ranks[r].fate = *analysis::fateOf(d->kind);
      out.ranks[r].why = d->message.substr(0, d->message.find('\n'));
    }
  }
  const bool runEnded = m.info.status != events::RunStatus::Running;
  for (RankProblem& p : out.ranks) {
    if (p.fate == RankFate::Unfinished && m.info.status == events::RunStatus::Killed) {
      p.fate = RankFate::Stopped;
      p.why = "the run was interrupted";
    }
    if (p.fate == RankFate::Unfinished && runEnded && p.why.empty())
      p.why =
          "stopped before its plan ended, without a record of why (a signal such as SIGKILL "
          "leaves none)";
  }
}

// Until when each rank was stuck: when it gave up waiting (its waits row or timeout record),
// or the run's last record.
void measureStuckTimes(const model::RunModel& m, RunProblems& out) {
  const int world = static_cast<int>(out.ranks.size());
  for (RankProblem& p : out.ranks) p.stuckUntilNs = m.maxTimeNs;
  for (const auto& w : m.waits)
    if (w.rank >= 0 && w.rank < world)
      out.ranks[w.rank].stuckUntilNs = std::max(out.ranks[w.rank].stuckUntilNs, w.timeNs);
  for (const auto& d : m.diagnoses)
    if (d.kind == events::DiagnosisKind::Timeout && d.rank >= 0 && d.rank < world)
      out.ranks[d.rank].stuckUntilNs = std::max(out.ranks[d.rank].stuckUntilNs, d.timeNs);
}

// The wait-for graph's edges (core/analysis, from the ranks' structured timeout records), as
// drawn on the timeline: who waits on whom, in which planned action, and which form a cycle.
void addWaits(const model::RunModel& m, const analysis::WaitGraph& graph, RunProblems& out) {
  const int world = static_cast<int>(out.ranks.size());
  for (const analysis::WaitEdge& e : graph.edges) {
    if (e.rank < 0 || e.rank >= world || e.waitsOn < 0 || e.waitsOn >= world) continue;
    RankProblem& p = out.ranks[e.rank];
    p.waitsOnRank = e.waitsOn;
    const int64_t planned = analysis::findAction(m, e.rank, e.iteration, e.actionSeq, true);
    if (planned >= 0) p.stuckPlan = static_cast<int32_t>(planned);
    out.waits.push_back({e.rank, p.stuckPlan, e.waitsOn, e.sentence(),
                         graph.inCycle(e.rank, e.waitsOn), cycleLabelFrom(graph, e.rank)});
  }
}

// The rank to show first: the graph's root cause, else a rank that failed or was killed, else
// the first that did not complete.  A rank killed by a signal is the cause whatever rank the
// graph's first verdict is about: its peers then wait on a rank that is gone (hung, or "peer
// lost"), as a consequence.  Of several killed ranks, the one that ended first (the launcher's
// record of when it saw each end; the run's status reason names the same rank).
int rootRank(const model::RunModel& m, const analysis::WaitGraph& graph,
             const std::vector<RankProblem>& ranks) {
  const int world = static_cast<int>(ranks.size());
  int root = graph.verdicts.empty() ? graph.erroredRank : graph.verdicts.front().aboutRank;
  if (root >= world) root = -1;
  for (int r = 0; r < world && root < 0; ++r)
    if (strength(ranks[r].fate) >= strength(RankFate::Failed)) root = r;
  for (int r = 0; r < world && root < 0; ++r)
    if (ranks[r].fate != RankFate::Completed) root = r;
  if (const int killed = firstKilledRank(m, ranks);
      killed >= 0 && (root < 0 || ranks[root].fate == RankFate::Killed ||
                      strength(ranks[root].fate) < strength(RankFate::Failed)))
    root = killed;
  return root;
}

// Corrupted messages (send and receive disagree), the causally first receive.  The causal
// order is built only when there is one to order (at 10^7 events it costs seconds and
// hundreds of MB while it exists).
void findCorruptMessages(const model::RunModel& m, RunProblems& out) {
  std::optional<analysis::CausalOrder> order;
  analysis::CausalKey firstKey;
  for (const auto& pair : m.pairs) {
    if (!pair.complete() || pair.ok()) continue;
    ++out.corruptMessages;
    if (!order) order.emplace(m);
    const analysis::CausalKey key = order->ofTransfer(pair.recv);
    if (out.firstCorruptTransfer < 0 || key < firstKey) {
      out.firstCorruptTransfer = pair.recv;
      firstKey = key;
    }
  }
}

}  // namespace

namespace {
bool endedItself(RankFate f) {
  return f == RankFate::Killed || f == RankFate::Failed;
}
}  // namespace

RunProblems::Causes RunProblems::causesOf(int rank) const {
  Causes out;
  if (rank < 0 || rank >= static_cast<int>(ranks.size())) return out;
  if (endedItself(ranks[rank].fate)) {
    out.own = true;
    if (!ranks[rank].why.empty()) out.lines.push_back(ranks[rank].why);
    return out;
  }
  // A captured job's own schedule that differs from the plan (PlanConformance's causes) comes
  // before the waits it led to.
  const auto& c = planConformance;
  for (const auto& cause : c.causes)
    if (cause.rank == rank) out.lines.push_back(cause.line());
  for (const auto& v : hangVerdicts)
    if (v.concerns(rank)) out.lines.push_back(v.sentence);
  out.own = !out.lines.empty();
  if (out.own) return out;
  if (firstStuckRank >= 0 && firstStuckRank < static_cast<int>(ranks.size()) &&
      endedItself(ranks[firstStuckRank].fate))
    out.lines.push_back("rank " + std::to_string(firstStuckRank) + ": " +
                        ranks[firstStuckRank].why);
  else if (!c.causes.empty())
    out.lines.push_back(c.causes.front().line());
  else if (!hangVerdicts.empty())
    out.lines.push_back(hangVerdicts.front().sentence);
  return out;
}

int leadRank(const RunProblems& p) {
  const int world = static_cast<int>(p.ranks.size());
  const int root = p.firstStuckRank;
  if (root >= 0 && root < world && endedItself(p.ranks[root].fate)) return root;
  // A captured job whose schedule differs from the plan: the rank the first cause is about
  // (the banner, `run` and `check` lead with that cause), when it did not complete.
  const auto& c = p.planConformance;
  if (!c.causes.empty()) {
    const int r = c.causes.front().rank;
    if (r >= 0 && r < world && p.ranks[r].fate != RankFate::Completed) return r;
  }
  return root;
}

RunProblems findProblems(const model::RunModel& m, const ReplayOrder& replay) {
  RunProblems out;
  out.ranks.resize(m.actions.size());
  judgeFates(m, out);
  measureStuckTimes(m, out);
  const analysis::WaitGraph graph = analysis::waitForGraph(m);
  addWaits(m, graph, out);
  out.firstStuckRank = rootRank(m, graph, out.ranks);
  out.hangVerdicts = graph.verdicts;
  findCorruptMessages(m, out);
  // Copies of a replicated tensor or loss that differ (the rule check's checksum_mismatch uses).
  const analysis::ReplicaReport replicas = analysis::compareReplicas(m);
  out.replicaMismatches = replicas.mismatches.size();
  if (!replicas.mismatches.empty())
    out.firstReplicaMismatch = analysis::describe(m, replicas.mismatches.front());
  auto nonFinite = nonFiniteInCausalOrder(m, replay);
  out.nonFiniteRecords = nonFinite.size();
  if (!nonFinite.empty()) out.firstNonFinite = nonFinite.front();
  if (const std::string layout = events::declaredLayoutText(m.info); !layout.empty())
    out.planConformance = analysis::judgeAgainstPlan(m, layout, "the layout the job declared");
  out.firstStuckRank = leadRank(out);
  return out;
}

}  // namespace stagescope::ui
