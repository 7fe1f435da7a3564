// Collective instances of a captured run: the rows that every member of a group wrote for one
// collective, grouped by its logical identity (group name and members, iteration, k-th
// collective on the group in that iteration: CollectiveRecord::groupSeq), with whether the
// members' results agree.
//
// Agreement judges the data: for ops whose result is the same tensor on every member by
// definition (all_reduce, broadcast, all_gather and their coalesced/into-tensor forms), the
// members' output checksums must be equal; barrier carries no data; the others (reduce,
// reduce_scatter, scatter, gather, all_to_all) give each member its own result, so their
// checksums are shown but not compared.  The export and the viewer both call this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

enum class CollectiveAgreement : uint8_t {
  Agree,        // every member's output checksum is the same (all members recorded)
  Differ,       // two members recorded different output checksums: a divergence
  NotCompared,  // the op gives members different results by design, or carries no data
  NoChecksums,  // recorded below level stats, or a member has none (failed, pending)
  Incomplete,   // not every member of the group recorded its row
};
const char* toString(CollectiveAgreement a);

// Whether every member of `op` holds the same result afterwards (so checksums compare).
bool collectiveResultsShared(const std::string& op);

struct CollectiveInstance {
  std::string group, op;  // op of the first member (opMismatch when members disagree)
  int32_t iteration = -1, groupSeq = -1;
  int32_t groupSize = 0;            // members the group has (from the rows)
  std::vector<int32_t> groupRanks;  // global ranks of the group, in group-rank order
  std::vector<size_t> members;      // indices into RunModel::collectives, by rank
  int64_t firstStartNs = 0;         // earliest member post
  int64_t lastStartNs = 0;          // when the last member joined
  int64_t lastEndNs = 0;            // latest member completion (0: some member never ended)
  bool opMismatch = false;          // members recorded different ops (a mismatched call)
  CollectiveAgreement agreement = CollectiveAgreement::Incomplete;
  bool complete() const { return static_cast<int32_t>(members.size()) == groupSize; }
};

// Every collective instance of `run`, ordered by (iteration, group, groupRanks, groupSeq).
std::vector<CollectiveInstance> collectiveInstances(const model::RunModel& run);

}  // namespace stagescope::analysis
