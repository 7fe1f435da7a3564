// Tensor values of a run: payload decoding and gathering of TP gradient shards into full
// parameters (the evidence of value comparisons at level full).
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include "core/events/Events.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

// One full parameter gathered from its shards (TP partitions; DP and TP replicas counted
// once, keyed by (partitionDim, partitionOffset)).
struct GatheredGradient {
  std::string param;
  std::string module;
  int iteration = -1;
  int dp = -1, microbatch = -1;  // gatherAccumulated: the replica and its local microbatch
  double norm = 0;               // sqrt(sum over distinct shards of shard norm^2)
  int shards = 0;                // distinct shards found
  bool complete = true;          // shard extents along partitionDim cover the full dimension
  std::vector<int64_t> fullShape;
  std::string layout;  // "replicated" or "dim0:[0,4)[4,8)" - equal layouts compare bitwise
  std::vector<uint64_t> shardChecksums;  // in offset order (0 when not recorded)
  bool hasValues = false;                // all shards carried float payloads (level full)
  std::vector<double> values;            // the full tensor, row-major, when hasValues
  bool nonFinite = false;                // a shard reported NaN/Inf in its stats
  std::string dtype;                     // of the first shard
  std::vector<int64_t> records;          // index of each distinct shard in run.gradients (phase
                                         // Reference: in run.referenceGradients)
};

// Gathers all records of `phase` (Reduced, Reference, ParamAfterStep, ...), sorted by
// (iteration, param).  values = decode payloads (float32/float64/bfloat16/float16) and
// assemble the full tensors.
// Phase Reference gathers the reference's truth: its records in float32/float64.
std::vector<GatheredGradient> gatherGradients(const model::RunModel& run, events::GradPhase phase,
                                              bool values);

// The per-microbatch accumulated gradients, gathered per (iteration, param, dp replica, local
// microbatch) from their TP shards (TP copies of a replicated parameter counted once), sorted
// by that key.  Each is the partial sum of that replica's microbatches up to this one.
std::vector<GatheredGradient> gatherAccumulated(const model::RunModel& run, bool values);

// The reference's second computation of its gradients (app/ReferenceRecord.h), the records not in
// float32: for a low-precision run, computed in the run's own dtype (bfloat16/float16) from the
// run's parameters; for a float32 run, on a float64 trajectory, for the iterations the reference
// did not restart from the run's parameters.  How far round-off alone moves each tensor; empty
// for files recorded before it existed.
std::vector<GatheredGradient> gatherReferenceSecondComputation(const model::RunModel& run,
                                                               bool values);

// Whether a reference record is the reference's truth (its float32 computation) rather than its
// second computation (gatherReferenceSecondComputation).
bool isReferenceTruth(const events::GradientRecord& r);

// Decodes a raw payload into doubles; false for unsupported dtypes or a size mismatch.
bool decodeValues(const std::vector<uint8_t>& bytes, const std::string& dtype,
                  std::vector<double>* out);

}  // namespace stagescope::analysis
