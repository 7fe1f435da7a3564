// The host memory a run will need, estimated from the config and the plan before any rank
// starts: `stagescope plan` prints it, `stagescope run` refuses a run whose estimate exceeds
// what the machine has available (MemAvailable) unless given --force.
//
// Per rank (bytes):
//   process   the measured baseline of an idle rank process: its private pages (Gloo,
//             threads, allocator, the shard writer) — small for ranks forked from the
//             launcher, which share its LibTorch pages, large for exec'd ranks
//             (engine/PreforkedRanks.h); values and how they were measured in the .cpp;
//   state     the stage's parameters x (value + gradient + optimizer state + the flat
//             buffer of the DP reduction), exact element counts of the stage model;
//   activations  what autograd keeps per microbatch of this stage (an approximation, counted
//             per transformer block in the .cpp) x the most microbatches the plan holds at
//             once on this rank (forwards minus backwards, walked over the rank's actions).
// Total = the shared pages once (LibTorch code and operator registry, the launcher) + the
// sum over ranks.  An estimate, not a bound: the bench (part 7) prints it next to the
// measured figure.  Arithmetic in double: no product of validated sizes can overflow it.
#pragma once

#include <string>
#include <vector>

#include "core/plan/Config.h"
#include "core/plan/Plan.h"

namespace stagescope::plan {

struct RankMemory {
  int rank = -1;
  std::string module;     // "vision+audio+llm" for a rank holding several stages (colocated)
  int stage = 0;          // pp index; -1 for a rank holding several stages
  double parameters = 0;  // elements held by this rank (its TP shard of its stage)
  double processBytes = 0, stateBytes = 0, activationBytes = 0;
  int peakMicrobatches = 0;  // the most microbatches whose activations are held at once
  double total() const { return processBytes + stateBytes + activationBytes; }
};

struct MemoryEstimate {
  std::vector<RankMemory> ranks;  // index = global rank
  double sharedBytes = 0;         // counted once for the whole run
  bool forkedRanks = true;        // ranks forked from the launcher (else exec'd)
  double totalBytes() const;
  const RankMemory& largestRank() const;
};

// Whether `stagescope run` forks the ranks of `config` from the launcher: device cpu and
// STAGESCOPE_EXEC_RANKS not 1 (engine/PreforkedRanks.h; a launcher that already runs threads
// falls back to exec, which `run` never does before its first launch).
bool forkedRanksFor(const RunConfig& config);

// `forkedRanks`: whether `run` will fork the ranks from the launcher (device cpu, and
// STAGESCOPE_EXEC_RANKS not 1) — see engine/PreforkedRanks.h.
MemoryEstimate estimateMemory(const RunConfig& config, const Plan& plan, bool forkedRanks);

// Parameter elements of pipeline stage `stage` of `module` on one TP rank: the count of the
// engine's StageModel, computed without it (the engine's tests compare the two).
double stageParameterCount(const RunConfig& config, const ModuleConfig& module, int stage);

// "1.23 GB", "456.7 MB", "12.0 kB" (powers of 1000).
std::string formatBytes(double bytes);

// For `plan`: one total line, then one line per (module, stage).
std::string renderMemoryEstimate(const MemoryEstimate& estimate);

// MemAvailable of /proc/meminfo in bytes (STAGESCOPE_MEMINFO names another file in that
// format, for tests); a negative value when it cannot be read.
double availableMemoryBytes();

// "" when `estimate` fits in `available` bytes (or available < 0: unknown), else one line:
// "estimated peak memory 35.2 GB (...) exceeds the 18.9 GB available ...; ... --force ...".
std::string memoryRefusal(const MemoryEstimate& estimate, double available);

}  // namespace stagescope::plan
