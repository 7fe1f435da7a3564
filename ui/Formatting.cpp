// The viewer's number formats (Formatting.h).
#include "ui/Formatting.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace stagescope::ui {

std::string formatDuration(double ns) {
  char buf[64];
  double a = std::fabs(ns);
  if (a < 1e3)
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  else if (a < 1e6)
    std::snprintf(buf, sizeof buf, "%.2f us", ns / 1e3);
  else if (a < 1e9)
    std::snprintf(buf, sizeof buf, "%.3f ms", ns / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.3f s", ns / 1e9);
  return buf;
}

std::string formatBytes(int64_t bytes) {
  char buf[64];
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%" PRId64 " B", bytes);
  else if (bytes < (1 << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
  return buf;
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

std::string microbatchSuffix(int microbatch) {
  return microbatch < 0 ? std::string() : " mb" + std::to_string(microbatch);
}

}  // namespace stagescope::ui
