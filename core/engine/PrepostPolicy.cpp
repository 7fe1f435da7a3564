#include "core/engine/PrepostPolicy.h"

#include <sched.h>

#include <stdexcept>

namespace stagescope::engine {

bool prepostReceives(const PrepostInputs& in) {
  const std::string setting = in.setting.value_or("auto");
  if (setting == "1") return true;
  if (setting == "0") return false;
  if (setting != "auto") {
    std::string shown = setting.size() > 40 ? setting.substr(0, 40) + "..." : setting;
    throw std::runtime_error("environment variable STAGESCOPE_PREPOST = '" + shown +
                             "': expected 1, 0 or auto");
  }
  return in.accelerator || in.ranksOnHost <= in.cores;
}

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

}  // namespace stagescope::engine
