// What went wrong in one run, as the viewer leads the user to it: each rank's fate (completed,
// hung, failed, killed, stopped: from the records each rank and the launcher wrote), the action
// each unfinished rank was stuck in, and, from core/analysis, who waits on whom
// (waitForGraph, built from structured records) and the non-finite records in causal order
// (nonFiniteInCausalOrder).  Computed once per loaded run.  ImGui-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/HangGraph.h"
#include "core/analysis/PlanConformance.h"
#include "core/analysis/RankFate.h"
#include "storage/RunFileError.h"
#include "ui/ReplayOrder.h"

namespace stagescope::ui {

// Each rank's fate, by the one rule of core/analysis/RankFate.h.
using analysis::RankFate;

struct RankProblem {
  RankFate fate = RankFate::Completed;
  int32_t stuckPlan = -1;    // index in plan[rank] of the first planned action never completed
  int32_t waitsOnRank = -1;  // from the rank's timeout record
  // Until when it was stuck (ns, the run's clock): when it gave up waiting (its waits row or
  // timeout record), else the run's last record.
  int64_t stuckUntilNs = 0;
  std::string why;  // the rank's own record (error text, exit), one line
};

// An edge of the wait-for graph (analysis::waitForGraph): `rank`, stuck in
// plan[rank][stuckPlan], waits on `waitsOn`.
struct WaitEdge {
  int32_t rank = -1, stuckPlan = -1;
  int32_t waitsOn = -1;
  std::string sentence;  // analysis::WaitEdge::sentence()
  bool inCycle = false;  // one of the wait-for graph's cycles (drawn as a cycle)
  // On the edge leaving a cycle's lowest rank, the whole cycle: "cycle r1 -> r2 -> r1".
  std::string cycleLabel;
};

// A record that carries NaN or Inf.
struct NonFinite {
  enum class Kind : uint8_t { None, Transfer, Gradient, Loss } kind = Kind::None;
  int64_t index = -1;  // into transfers / gradients / losses
  int32_t rank = -1;
  int32_t action = -1;          // the action on `rank` that produced it (-1 when unknown)
  int64_t causalPosition = -1;  // ReplayOrder position of that action's end
};

struct RunProblems {
  std::vector<RankProblem> ranks;  // [rank]
  std::vector<WaitEdge> waits;
  NonFinite firstNonFinite;
  size_t nonFiniteRecords = 0;
  // Messages whose receiver recorded another checksum, shape or dtype than the sender (the
  // pairs' own flags), and the causally first one's receive side (-1: none).
  size_t corruptMessages = 0;
  int64_t firstCorruptTransfer = -1;
  // Copies of one replicated tensor or loss that differ (analysis::compareReplicas), and the
  // first one's sentence (analysis::describe), as `check` prints it.
  size_t replicaMismatches = 0;
  std::string firstReplicaMismatch;
  // The first stuck rank to show: the rank of the wait-for graph's first verdict (a cycle, a
  // missing partner) or its errored rank, else a killed/failed rank, else the lowest
  // unfinished rank; a killed rank, then a captured job's first schedule cause, lead over the
  // graph (leadRank).
  int32_t firstStuckRank = -1;
  // Why the run hung (analysis::WaitGraph::verdicts): root cause first, as `run` and `check`
  // say it.  causesOf(rank) picks the ones about a rank.
  std::vector<analysis::HangVerdict> hangVerdicts;
  // Why `rank` is stuck, root cause first (the stuck inspector's first lines).
  struct Causes {
    bool own = false;                // about this rank; else the run's root cause
    std::vector<std::string> lines;  // sentences, root cause first
  };
  // A killed or failed rank: its own record (nothing waits it out: it is the cause).  Else a
  // captured job's schedule causes about it (planConformance), then the hang verdicts about it
  // (HangVerdict::concerns).  Else, for a bystander, the run's root cause: a killed or failed
  // root rank's record, the first schedule cause, or the first verdict.
  Causes causesOf(int rank) const;
  // A captured job that declared its layout, against the plan of that layout (the rule
  // `check`'s plan_order applies): what the plan overlay draws on its rows.  judged = false
  // for stagescope's own runs (their plan is model.plan) and undeclared jobs.
  analysis::Conformance planConformance;
  bool any() const { return firstStuckRank >= 0 || firstNonFinite.kind != NonFinite::Kind::None; }
};

RunProblems findProblems(const model::RunModel& model, const ReplayOrder& replay);

// The stuck rank to show first, given the wait-for graph's root (p.firstStuckRank): a killed or
// failed root; else the rank a captured job's first schedule cause is about (planConformance),
// when it did not complete; else the root.
int leadRank(const RunProblems& p);

// Non-finite records in causal order: analysis::CausalOrder, the order `check` names its
// first NaN/Inf by (findProblems' firstNonFinite is the first of these).
std::vector<NonFinite> nonFiniteInCausalOrder(const model::RunModel& model,
                                              const ReplayOrder& replay);

}  // namespace stagescope::ui
