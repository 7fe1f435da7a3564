// "First" means causally first.  Every verdict that names a first event (first divergence,
// first non-finite value, first stuck action) orders events by one key:
//
//   1. iteration (nothing of iteration i+1 happens before anything of iteration i that it
//      could depend on: messages never cross iterations and each rank runs its iterations in
//      order);
//   2. a Lamport clock over the executed actions: plan order within a rank, a receive after
//      the send it receives, and a collective (TP peers' action of the same iteration, kind and
//      microbatch; DP peers' DpReduce) after every member started it;
//   3. ties (concurrent events) broken by the global pipeline stage of the event's module on
//      its rank (a colocated rank holds several),
//      then by rank, then by the event's position on that rank.
//
// Keys are comparable only within one run.  Across two runs (compare), the key of an aligned
// item is its key in run A when A has it, else in run B.
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "core/analysis/Pairing.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

// Causal clock (Lamport) over executed actions: start[r][i] / end[r][i] for
// run.actions[r][i].  A receive ends after the matching send started; sends within an
// action are posted at its start, so combined send/recv actions cannot form cycles.
struct CausalClock {
  std::vector<std::vector<int64_t>> start, end;
};
CausalClock causalClock(const model::RunModel& run, const std::vector<model::TransferPair>& pairs);

// The ordering key of one event (see the header comment).  Default: after everything.
struct CausalKey {
  int iteration = INT_MAX;
  int64_t clock = INT64_MAX;
  int globalStage = INT_MAX;
  int rank = INT_MAX;
  int64_t position = INT64_MAX;  // action index on the rank, then 0 for send / 1 for receive
  auto tie() const { return std::tie(iteration, clock, globalStage, rank, position); }
  bool operator<(const CausalKey& o) const { return tie() < o.tie(); }
  bool operator==(const CausalKey& o) const { return tie() == o.tie(); }
  bool known() const { return clock != INT64_MAX; }
};

// The causal keys of a run's records.  Built once per run (pairs + clock), then cheap lookups.
class CausalOrder {
 public:
  explicit CausalOrder(const model::RunModel& run);
  // Holds references into the run and into itself (pairs()): neither copied nor moved.
  CausalOrder(const CausalOrder&) = delete;
  CausalOrder& operator=(const CausalOrder&) = delete;

  // An action by (rank, iteration, seq): its start (or end, for what the action produced).
  CausalKey ofAction(int rank, int iteration, int seq, bool atEnd) const;
  // A message side: a send at its action's start, a receive at its action's end.
  CausalKey ofTransfer(int64_t transferIndex) const;
  // A loss: the end of the Forward of (rank, iteration, microbatch); an iteration's loss
  // (microbatch -1): the end of its last Forward.
  CausalKey ofLoss(const events::LossRecord& loss) const;
  // An input row: the start of its module's Forward of (rank, iteration, microbatch).
  CausalKey ofInput(const events::InputRecord& input) const;
  // A gradient record: Accumulated at the end of its microbatch's Backward, Reduced at the end
  // of the rank's DpReduce (else its last Backward), ParamAfterStep at the OptimizerStep.
  CausalKey ofGradient(const events::GradientRecord& grad) const;

  const std::vector<model::TransferPair>& pairs() const { return *pairs_; }

 private:
  CausalKey key(int rank, int iteration, int64_t index, bool atEnd, int sub) const;
  // The first (or last) action of `kind` and `microbatch` (-1: any) of an iteration on a
  // rank; a non-empty `module` skips other modules' actions of a colocated rank.
  int64_t findKind(int rank, int iteration, events::ActionKind kind, int microbatch, bool last,
                   const std::string& module) const;
  std::string lossModule(int rank) const;

  const model::RunModel& run_;
  ActionIndex actions_;  // the run's executed actions by (rank, iteration, seq)
  // The run's pairs (RunModel::pairs), or ownPairs_ when the model has none: not a copy.
  std::vector<model::TransferPair> ownPairs_;
  const std::vector<model::TransferPair>* pairs_ = nullptr;
  CausalClock clock_;
  std::vector<std::vector<int>> stageOf_;  // [rank][action]: its module's global stage
};

}  // namespace stagescope::analysis
