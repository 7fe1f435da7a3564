// The run's pairs and lookups over the read model (tolerant of holes in partial runs).  Which
// send and which receive are one message is core/model/Pairing.h's rule, decided only there.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>
#include "core/model/RunModel.h"

namespace stagescope::analysis {

// Rank lookup that tolerates holes (partial runs).  nullptr when unknown.  A colocated rank has
// one row per module: this is its first (RunModel::rankInfo); the overload names the module.
const events::RankInfo* findRank(const model::RunModel& run, int rank);
const events::RankInfo* findRank(const model::RunModel& run, int rank, const std::string& module);

// RunModel::pairs when the reader filled it, otherwise the pairs of the one pairing rule
// (model::pairTransfers, core/model/Pairing.h) computed into scratch.
const std::vector<model::TransferPair>& pairsOf(const model::RunModel& run,
                                                std::vector<model::TransferPair>& scratch);

// Position of a (rank, iteration, seq) action in run.actions[rank] (or run.plan[rank] with
// planned = true); -1 when absent.
int64_t findAction(const model::RunModel& run, int rank, int iteration, int seq,
                   bool planned = false);

// findAction for many lookups in one run: each rank's list (sorted by (iteration, seq), as the
// reader leaves it) gets a table of where each of its iterations starts, so that a lookup
// searches that table (a few thousand entries, in cache) and then one iteration's actions,
// instead of a whole rank's hundreds of thousands of records.  O(actions) memory at worst.
// Refers to the run: it must outlive the index.
class ActionIndex {
 public:
  explicit ActionIndex(const model::RunModel& run, bool planned = false);
  // The same answer as findAction(run, rank, iteration, seq, planned).
  int64_t find(int rank, int iteration, int seq) const;

 private:
  struct Start {
    int32_t iteration;
    uint32_t first;  // index of the iteration's first action
  };
  const std::vector<std::vector<events::ActionRecord>>* lists_;
  std::vector<std::vector<Start>> starts_;  // per rank, by iteration
};

// The records of `iteration` in a rank's action or plan list (sorted by iteration, as the
// reader leaves them); empty when it has none.
std::span<const events::ActionRecord> iterationRange(const std::vector<events::ActionRecord>& list,
                                                     int iteration);

// Source global stage of a transfer (pipeline position), -1 when the rank is unknown.
int sourceStage(const model::RunModel& run, const events::TransferRecord& t);

}  // namespace stagescope::analysis
