// The causal replay order.  Every action becomes two steps, its begin and its end; the
// global order is a topological merge of the ranks' own sequences under the constraint
// "a receive ends only after its send has begun" (RunModel::pairs give send -> receive).
// Timestamps only break ties between ready ranks, so a skewed clock never puts a receive
// before its send.  Begin/end (rather than whole actions) keeps combined exchanges
// (SF_RB against SB_RF) acyclic.  ImGui-free.
#pragma once

#include <cstdint>
#include <vector>

#include "storage/RunFileError.h"

namespace stagescope::ui {

// 8 bytes: a 10^7-event run has ~10^7 steps.  Ranks fit 16 bits (a run has at most 4096).
struct ReplayStep {
  int32_t action = -1;  // index into RunModel::actions[rank]
  int16_t rank = -1;
  bool end = false;  // false: the action begins; true: it ends
};

struct RankReplayState {
  int32_t done = 0;      // actions completed
  bool running = false;  // actions[done] has begun and not ended
};

// Where each transfer pair's sides sit in RunModel::actions (-1 when unknown).
struct PairActions {
  int32_t sendRank = -1, sendAction = -1;
  int32_t recvRank = -1, recvAction = -1;
};

std::vector<PairActions> pairActions(const model::RunModel& model);

class ReplayOrder {
 public:
  static ReplayOrder build(const model::RunModel& model, const std::vector<PairActions>& pairs);

  const std::vector<ReplayStep>& steps() const { return steps_; }
  size_t size() const { return steps_.size(); }
  // Constraints had to be dropped to make progress (inconsistent data).
  size_t brokenConstraints() const { return broken_; }

  // State of `rank` after the first `step` steps (0 .. size()).
  RankReplayState stateAt(int rank, int64_t step) const;
  // Forwards done minus backwards done on `rank` after `step` steps.
  int storedActivations(int rank, int64_t step) const;
  // Global position of an action's begin (end=false) or end step.
  int64_t positionOf(int rank, int32_t action, bool end) const {
    return positions_[rank][2 * static_cast<size_t>(action) + (end ? 1 : 0)];
  }
  // Navigation targets: the next/previous step at which a microbatch enters the pipeline
  // (a forward begins on a first-stage rank) or an iteration begins.
  int64_t nextMicrobatch(int64_t step) const;
  int64_t prevMicrobatch(int64_t step) const;
  int64_t nextIteration(int64_t step) const;
  int64_t prevIteration(int64_t step) const;

 private:
  std::vector<ReplayStep> steps_;
  // [rank][2*action + end]; 32 bits: 2^31 steps would be 2^30 actions, ~60 GB of records.
  std::vector<std::vector<int32_t>> positions_;
  std::vector<std::vector<int32_t>> fwdCum_, bwdCum_;  // [rank][k]: among the first k actions
  std::vector<int64_t> mbStarts_, iterStarts_;
  size_t broken_ = 0;
};

}  // namespace stagescope::ui
