// The read model: one in-memory view of a run file, shared by every consumer (GUI, check,
// compare, export, tests).  Plain structs over the events vocabulary: no LibTorch, no SQLite.
// storage/RunReader fills it from a run file; core/analysis judges it; ui/ and app/ present it.
//
// Contract: vectors are sorted as documented per field; index vectors hold positions into
// them.  Payload bytes are not loaded unless LoadOptions::payloads is set (the GUI fetches a
// single payload on demand with RunReader::transferPayload).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/events/Events.h"
#include "core/events/MessageRole.h"
#include "core/events/ModuleStep.h"

namespace stagescope::model {

// A send and its matching receive (positions into RunModel::transfers; -1 when missing).
struct TransferPair {
  int64_t send = -1;
  int64_t recv = -1;
  bool shapeMatches = true;
  bool checksumMatches = true;  // false only when both sides recorded a checksum that differs
  bool dtypeMatches = true;     // false only when both sides exist with different dtypes
  bool complete() const { return send >= 0 && recv >= 0; }
  // The one rule of "the recorded sides agree" (shape, dtype, checksum): check's counts and
  // the viewer's mismatch markers and find both call it. A missing side is not disagreement.
  bool sidesAgree() const { return shapeMatches && checksumMatches && dtypeMatches; }
  bool ok() const { return complete() && sidesAgree(); }
};

struct RunModel {
  std::string path;
  int schemaVersion = 0;
  bool partial = false;            // a rank shard is missing or the merge did not finish
  std::vector<std::string> notes;  // why partial, merge log lines

  events::RunInfo info;
  // One row per (rank, module) the rank holds, as the run file's `ranks` table: a rank of a
  // layout without colocation has one row, a colocated rank (modules sharing ranks) one per
  // module, each with that module's grid coordinates and global stage.  Sorted by rank, global
  // stage, then config order (sortRankRows); rank-wide facts (host, device, pid, clock offset) are
  // equal on every row of a rank.  Never index by rank: use modulesOf / rankInfo.
  std::vector<events::RankInfo> ranks;
  std::vector<std::vector<events::ActionRecord>> plan;  // [rank] sorted by (iteration, seq)
  std::vector<std::vector<events::ActionRecord>>
      actions;  // [rank] sorted by (iteration, seq); times ascending
  std::vector<events::TransferRecord>
      transfers;  // sorted by (iteration, microbatch, edge, direction, srcRank, dstRank, side)
  std::vector<int64_t> transferIds;  // row id in the file, parallel to transfers
  std::vector<TransferPair> pairs;   // one per message (send or recv seen), in transfers order
  std::vector<events::GradientRecord>
      gradients;  // sorted by (iteration, phase, param, tp, pp, dp, microbatch)
  // Gradient rows the file holds that `gradients` does not (storage::LoadOptions::
  // onlyReducedGradients): counted as events, never judged.  0 for a whole model.
  size_t gradientsNotLoaded = 0;
  std::vector<events::LossRecord>
      losses;  // ranks only; sorted by (iteration, microbatch, dp, rank)
  // The single-process reference (`run --reference`), never mixed into the per-rank vectors:
  // losses sorted by (iteration, microbatch, dp), rank -1; gradients (phase Reference, full
  // tensors, rank -1) sorted by (iteration, param).
  std::vector<events::LossRecord> referenceLosses;
  std::vector<events::GradientRecord> referenceGradients;
  std::vector<events::InputRecord>
      inputs;  // sorted by (iteration, microbatch, rank, module, name); payload at level full only
  std::vector<events::DiagnosisRecord> diagnoses;  // sorted by (timeNs, rank)
  // Collectives of captured jobs, sorted by (iteration, group, groupSeq, rank).
  std::vector<events::CollectiveRecord> collectives;
  // What captured messages mean in the job's calls (events/MessageRole.h), file order.
  std::vector<events::MessageRoleRecord> messageRoles;
  // Captured jobs' per-module reduction and loss-scale rows (events/ModuleStep.h), sorted by
  // (iteration, module, rank).
  std::vector<events::ModuleStepRecord> moduleSteps;
  // What each rank waited on when it timed out (the hang's wait-for edges), sorted by
  // (timeNs, rank).  Empty for runs without a timeout and for format-1 files.
  std::vector<events::WaitRecord> waits;
  // Planted faults that acted on sends, sorted by (timeNs, rank); a file written before they
  // had a table of their own gives those its `fault_injected` diagnoses describe.
  std::vector<events::InjectedFaultRecord> injectedFaults;
  // Captured point-to-point ops one batch_isend_irecv posted, sorted by (rank, iteration, seq);
  // batchesRecorded is false for a file without the p2p_batches table (nothing is known).
  std::vector<events::BatchMemberRecord> batchMembers;
  bool batchesRecorded = false;
  // True when the reader subtracted RankInfo::clockOffsetNs from every time above (it does
  // by default); consumers never subtract it again.
  bool clockOffsetsApplied = false;

  int64_t minTimeNs = 0, maxTimeNs = 0;  // over all actions (after clock offsets)

  // Lookups (implemented in core/model/RunModel.cpp).
  // Every row of `rank` (empty when the rank has none), by global stage.
  std::span<const events::RankInfo> modulesOf(int rank) const;
  // The rank's first row (lowest global stage): its rank-wide facts, and its coordinates when
  // it holds one module.  nullptr when the rank has no row.
  const events::RankInfo* rankInfo(int rank) const;
  // The row of `module` on `rank`; nullptr when the rank does not hold that module.
  const events::RankInfo* rankInfo(int rank, const std::string& module) const;
  // Where an action ran: its module's row on its rank; a rank-wide action (module "") or a
  // module the rank has no row for gets the rank's first row.
  const events::RankInfo* placementOf(const events::ActionRecord& a) const;
  // Where a message side was recorded: the sender's row of the edge's source module (side
  // Send) or the receiver's row of its destination module (side Recv).
  const events::RankInfo* placementOf(const events::TransferRecord& t) const;
  // Whether `rank` holds more than one module.
  bool colocated(int rank) const { return modulesOf(rank).size() > 1; }
  // "llm" for one module, "vision+llm" for a colocated rank (by global stage); "" without rows.
  std::string moduleLabel(int rank) const;
  // Distinct ranks that have a row.
  int rankCount() const;
  int iterations() const { return info.iterations; }
  size_t eventCount() const;  // actions + transfers + gradients (loaded or not) + losses
};

// The modules at the two ends of a transfer's edge: ("llm", "llm") for "llm:pp0->pp1",
// ("vision", "llm") for the bridge "vision->llm".  A local hand-off between two modules on one
// rank is a bridge edge whose srcRank == dstRank.
std::pair<std::string, std::string> edgeModules(const events::TransferRecord& t);

// Puts rows of the `ranks` table into RunModel::ranks order: by rank, then global stage, then
// the module's position in `modules` (config order: encoders before the llm that consumes
// them), then name; a (rank, module) recorded twice keeps its last row (file order).
void sortRankRows(std::vector<events::RankInfo>& rows,
                  const std::vector<events::ModuleInfo>& modules = {});

// Whether a message never left its rank (a local hand-off between colocated modules).
inline bool isLocalHandOff(const events::TransferRecord& t) {
  return t.srcRank == t.dstRank && t.srcRank >= 0;
}

// Whether checksums of runs `a` and `b` were computed by the same function (format-1 files
// used a non-standard FNV-1a; format 2 uses XXH3-64).  Cross-run checksum comparisons must
// call this first: checksums of different functions are not evidence of anything.
inline bool sameChecksumFunction(const RunModel& a, const RunModel& b) {
  return a.info.checksumFunction == b.info.checksumFunction;
}

}  // namespace stagescope::model
