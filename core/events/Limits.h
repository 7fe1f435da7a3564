// Bounds shared by the config validator (core/plan/Config.h, limits) and the run-file reader
// (storage/RunReader): a config cannot ask for more, so a run file that claims more is corrupt.
// Every count, size or index read from a file is checked against these before it sizes
// anything.  Standard library only.
#pragma once

#include <cstdint>

namespace stagescope::events::limits {

constexpr int64_t kMaxWorldSize = 4096;        // ranks of one run
constexpr int64_t kMaxIterations = 1'000'000;  // iterations of one run
constexpr int64_t kMaxMicrobatches = 65'536;   // microbatches per iteration
constexpr int64_t kMaxElements = 1LL << 36;    // elements of one tensor or parameter set

}  // namespace stagescope::events::limits
