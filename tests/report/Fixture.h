// Synthetic runs built in memory for the report tests and the compare benchmark: one "llm"
// module on a TP x PP x DP grid running 1F1B with separate send/recv actions, with
// layout-independent numbers (a tensor's values depend on (seed, iteration, microbatch,
// layer boundary) or (seed, parameter, iteration), never on the layout).
#pragma once

#include <cstdint>
#include <string>

#include "core/analysis/Check.h"
#include "core/model/RunModel.h"

namespace stagescope::report::testing {

struct FixtureOptions {
  int tp = 1, pp = 2, dp = 1;
  int microbatches = 4;
  int iterations = 1;
  int layers = 4;  // total, split evenly over pp
  uint64_t seed = 1;
  bool reference = true;  // record GradPhase::Reference gradients
  bool payloads = false;  // gradient payloads (level full)
  int64_t forwardNs = 1'000'000, backwardNs = 2'000'000, commNs = 50'000;
};

model::RunModel makeRun(const FixtureOptions& opts);

// Recomputes RunModel::pairs after a test edited transfers.
void repair(model::RunModel& run);

// A copy of `run` killed as `iteration` began: status killed ("rank 1 was killed"), none of
// that iteration's or later records, pairs rebuilt.  Compared with `run`: INCOMPLETE.
model::RunModel killedAt(model::RunModel run, int iteration);

uint64_t fnv1a(const void* data, size_t n);

// ---- helpers the check, compare and report tests share ----------------------------------
// A path in this process's own temporary directory (created).
std::string tempPath(const std::string& name);
// A file's bytes ("" when it cannot be read).
std::string readFile(const std::string& path);
// The first finding of check class `name`, or nullptr.
const analysis::Finding* firstOf(const analysis::CheckReport& r, const std::string& name);
// The index of the transfer record of (edge, direction, iteration, microbatch, side), or -1.
int64_t findTransfer(const model::RunModel& run, const std::string& edge, events::Direction dir,
                     int it, int mb, events::Side side);

}  // namespace stagescope::report::testing
