// The per-microbatch accumulated gradients against the reduced gradient they add up to.
//
// The engine (core/engine/Executor.cpp) never zeroes a parameter's .grad between the
// microbatches of an iteration: after each backward it records the running sum (phase
// `accumulated`, loss scale undone), and the DP reduce sums the last of them over the module's
// DP group and divides by the llm's dp (and the loss scale).  So, per (iteration, parameter,
// TP shard, tp, pp):
//
//     reduced  =  sum over the module's DP replicas of (its accumulated gradient at its last
//                 microbatch)  /  dp of the llm
//
// judged by the tolerance rule (Tolerance.h, relative L2 with the model-norm floor) on values
// (level full), or bitwise by checksums where the module and the llm have one replica each
// (then the reduction is a division by 1 x the loss scale, the same operation as recording the
// accumulated gradient unscaled: measured bitwise equal).  The other invariant one might try --
// replicas' accumulated gradients of one microbatch agree -- does not hold here: each DP
// replica sees other samples.  Only the last microbatch's partial sum is judged; the earlier
// ones are judged by `compare` against another run (Align.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/Tolerance.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct AccumulationMismatch {
  int iteration = -1;
  std::string param, module;
  int tp = -1, pp = -1;
  int64_t partitionOffset = -1;
  int rank = -1;        // the reduced copy's rank (the lowest dp)
  double distance = 0;  // relative L2 (INFINITY for a checksum difference)
  double bound = 0;
  std::string sentence;  // one sentence naming it
};

struct AccumulationReport {
  int64_t judged = 0;    // reduced shards judged against their replicas' accumulated sums
  int64_t bitwise = 0;   // of them by checksums (one replica)
  int64_t unjudged = 0;  // a replica's accumulated record missing, or no values with dp > 1
  double worst = 0;      // the largest distance / bound among the judged by values
  std::vector<AccumulationMismatch> mismatches;
  std::string summary() const;  // "N reduced gradients equal their replicas' accumulated sums ..."
};

AccumulationReport judgeAccumulation(const model::RunModel& run, const ToleranceRule& rule);

}  // namespace stagescope::analysis
