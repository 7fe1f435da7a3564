// The recording clock: CLOCK_MONOTONIC of this host, in nanoseconds.
#pragma once

#include <cstdint>
#include <ctime>

namespace stagescope::engine {

inline int64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

}  // namespace stagescope::engine
