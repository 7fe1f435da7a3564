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
#include <string>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::model {

// A send and its matching receive (positions into RunModel::transfers; -1 when missing).
struct TransferPair {
  int64_t send = -1;
  int64_t recv = -1;
  bool shapeMatches = true;
  bool checksumMatches = true;  // false only when both sides recorded a checksum that differs
  bool dtypeMatches = true;     // false only when both sides exist with different dtypes
  bool complete() const { return send >= 0 && recv >= 0; }
  bool ok() const { return complete() && shapeMatches && checksumMatches && dtypeMatches; }
};

struct RunModel {
  std::string path;
  int schemaVersion = 0;
  bool partial = false;            // a rank shard is missing or the merge did not finish
  std::vector<std::string> notes;  // why partial, merge log lines

  events::RunInfo info;
  std::vector<events::RankInfo> ranks;  // sorted by rank; ranks[i].rank == i when complete
  std::vector<std::vector<events::ActionRecord>> plan;  // [rank] sorted by (iteration, seq)
  std::vector<std::vector<events::ActionRecord>>
      actions;  // [rank] sorted by (iteration, seq); times ascending
  std::vector<events::TransferRecord>
      transfers;  // sorted by (iteration, microbatch, edge, direction, srcRank, dstRank, side)
  std::vector<int64_t> transferIds;  // row id in the file, parallel to transfers
  std::vector<TransferPair> pairs;   // one per message (send or recv seen), in transfers order
  std::vector<events::GradientRecord>
      gradients;  // sorted by (iteration, phase, param, tp, pp, dp, microbatch)
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
  // What each rank waited on when it timed out (the hang's wait-for edges), sorted by
  // (timeNs, rank).  Empty for runs without a timeout and for format-1 files.
  std::vector<events::WaitRecord> waits;
  // True when the reader subtracted RankInfo::clockOffsetNs from every time above (it does
  // by default); consumers never subtract it again.
  bool clockOffsetsApplied = false;

  int64_t minTimeNs = 0, maxTimeNs = 0;  // over all actions (after clock offsets)

  // Lookups (implemented in core/model/RunModel.cpp).
  const events::RankInfo* rankInfo(int rank) const;
  int iterations() const { return info.iterations; }
  size_t eventCount() const;  // actions + transfers + gradients + losses
};

// Whether checksums of runs `a` and `b` were computed by the same function (format-1 files
// used a non-standard FNV-1a; format 2 uses XXH3-64).  Cross-run checksum comparisons must
// call this first: checksums of different functions are not evidence of anything.
inline bool sameChecksumFunction(const RunModel& a, const RunModel& b) {
  return a.info.checksumFunction == b.info.checksumFunction;
}

}  // namespace stagescope::model
