// Shared analyses over the read model used by `check`, `compare`, `export` and the viewer:
// send/recv pairing, logical transfer keys in schedule order, gathering of TP gradient shards into
// full parameters, a causal (happens-before) clock over actions, and per-rank time accounting with
// the measured pipeline bubble.
//
// Conventions shared by every function here:
//   * Action times are the recording host's monotonic clock; they are mapped onto rank 0's
//     clock by subtracting RankInfo::clockOffsetNs (0 for single-host runs).
//   * Schedule order of messages: (iteration, microbatch, activations before gradients,
//     activations in pipeline order (source global stage ascending), gradients in reverse
//     pipeline order (source global stage descending), edge name, source dp replica).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/events/Events.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

// Rank lookup that tolerates holes (partial runs).  nullptr when unknown.
const events::RankInfo* findRank(const model::RunModel& run, int rank);

// Pairs sends with receives by (edge, direction, iteration, microbatch, srcRank, dstRank);
// several messages with the same key pair up in order.  Same semantics as RunModel::pairs.
std::vector<model::TransferPair> pairTransfers(const std::vector<events::TransferRecord>& t);

// RunModel::pairs when the reader filled it, otherwise pairs computed here (into scratch).
const std::vector<model::TransferPair>& pairsOf(const model::RunModel& run,
                                                std::vector<model::TransferPair>& scratch);

// Position of a (rank, iteration, seq) action in run.actions[rank] (or run.plan[rank] with
// planned = true); -1 when absent.
int64_t findAction(const model::RunModel& run, int rank, int iteration, int seq,
                   bool planned = false);

// Source global stage of a transfer (pipeline position), -1 when the rank is unknown.
int sourceStage(const model::RunModel& run, const events::TransferRecord& t);

// One full parameter gathered from its shards (TP partitions; DP and TP replicas counted
// once, keyed by (partitionDim, partitionOffset)).
struct GatheredGradient {
  std::string param;
  std::string module;
  int iteration = -1;
  double norm = 0;       // sqrt(sum over distinct shards of shard norm^2)
  int shards = 0;        // distinct shards found
  bool complete = true;  // shard extents along partitionDim cover the full dimension
  std::vector<int64_t> fullShape;
  std::string layout;  // "replicated" or "dim0:[0,4)[4,8)" - equal layouts compare bitwise
  std::vector<uint64_t> shardChecksums;  // in offset order (0 when not recorded)
  bool hasValues = false;                // all shards carried float payloads (level full)
  std::vector<double> values;            // the full tensor, row-major, when hasValues
  bool nonFinite = false;                // a shard reported NaN/Inf in its stats
};

// Gathers all records of `phase` (Reduced, Reference, ParamAfterStep, ...), sorted by
// (iteration, param).  values = decode payloads (float32/float64/bfloat16/float16) and
// assemble the full tensors.
std::vector<GatheredGradient> gatherGradients(const model::RunModel& run, events::GradPhase phase,
                                              bool values);

// Decodes a raw payload into doubles; false for unsupported dtypes or a size mismatch.
bool decodeValues(const std::vector<uint8_t>& bytes, const std::string& dtype,
                  std::vector<double>* out);

// Causal clock (Lamport) over executed actions: start[r][i] / end[r][i] for
// run.actions[r][i].  A receive ends after the matching send started; sends within an
// action are posted at its start, so combined send/recv actions cannot form cycles.
struct CausalClock {
  std::vector<std::vector<int64_t>> start, end;
};
CausalClock causalClock(const model::RunModel& run, const std::vector<model::TransferPair>& pairs);

// Time accounting per rank, over all iterations, on rank 0's clock.
struct RankTime {
  int rank = -1;
  std::string module;
  int tp = 0, pp = 0, dp = 0, globalStage = 0;
  double forwardMs = 0, backwardMs = 0, commMs = 0, otherMs = 0, idleMs = 0, spanMs = 0;
  // 1 - compute / (the iteration's compute window, first forward start to last backward end
  // on any rank), averaged over iterations.
  double bubble = 0;
};
struct TimeBreakdown {
  std::vector<RankTime> ranks;
  std::vector<double> stepMs;  // per iteration: last action end - first action start, all ranks
  double medianStepMs = 0, meanStepMs = 0;
  double measuredBubble = 0;  // mean over ranks
  double expectedBubble = 0;  // (p-1)/(m+p-1)
  int stages = 0, microbatches = 0;
};
TimeBreakdown timeBreakdown(const model::RunModel& run);

// Small helpers shared by verdict messages and the writers.
std::string formatChecksum(uint64_t checksum);  // 16 hex digits
std::string formatShape(const std::vector<int64_t>& shape);
double relativeDifference(double a, double b);  // |a-b| / max(|a|,|b|), 0 when both 0

}  // namespace stagescope::analysis
