#include "core/engine/RankEnv.h"

#include "core/events/Limits.h"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace stagescope::engine {
namespace {

const char* firstSet(std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names) {
    if (const char* v = std::getenv(n); v != nullptr && *v != '\0') {
      *which = n;
      return v;
    }
  }
  return nullptr;
}

// The integer in variable `names` (the first one set), which must lie in [lo, hi]; `fallback`
// when none is set.  Anything else - text, a sign, a value outside the range of any size - is
// one line naming the variable, its value and the range.
int intFrom(std::initializer_list<const char*> names, int fallback, long lo, long hi) {
  const char* which = nullptr;
  const char* text = firstSet(names, &which);
  if (text == nullptr) return fallback;
  const std::string value = text;
  const bool digits =
      value.find_first_not_of("0123456789", value[0] == '-' ? 1 : 0) == std::string::npos &&
      value != "-";
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (!digits || errno == ERANGE || v < lo || v > hi) {
    std::string shown;
    for (char c : value.substr(0, 40)) shown += (c < 0x20 || c == 0x7f) ? '?' : c;
    if (value.size() > 40) shown += "...";
    throw std::runtime_error(std::string("environment variable ") + which + " = '" + shown +
                             "': expected an integer in " + std::to_string(lo) + ".." +
                             std::to_string(hi));
  }
  return static_cast<int>(v);
}

constexpr long kMaxRanks = events::limits::kMaxWorldSize;  // a config allows no more

}  // namespace

RankEnv readRankEnv() {
  RankEnv env;
  env.rank = intFrom({"RANK", "SLURM_PROCID"}, 0, 0, kMaxRanks - 1);
  env.worldSize = intFrom({"WORLD_SIZE", "SLURM_NTASKS"}, 1, 1, kMaxRanks);
  env.localRank = intFrom({"LOCAL_RANK", "SLURM_LOCALID"}, env.rank, 0, kMaxRanks - 1);
  env.localWorldSize = intFrom({"LOCAL_WORLD_SIZE"}, env.worldSize, 1, kMaxRanks);
  env.masterPort = intFrom({"MASTER_PORT"}, 29500, 1, 65535);
  const char* which = nullptr;
  if (const char* addr = firstSet({"MASTER_ADDR"}, &which)) env.masterAddr = addr;
  if (const char* l = std::getenv("STAGESCOPE_LAUNCHER_STORE")) env.launcherHostsStore = *l == '1';
  if (const char* a = std::getenv("TORCHELASTIC_USE_AGENT_STORE"))
    env.agentHostsStore = std::string(a) == "True" || std::string(a) == "true" || *a == '1';
  env.restartCount = intFrom({"TORCHELASTIC_RESTART_COUNT"}, 0, 0, 1000000);
  if (const char* f = firstSet({"TORCHELASTIC_ERROR_FILE"}, &which)) env.errorFile = f;
  if (env.worldSize < 1 || env.rank >= env.worldSize) {
    throw std::runtime_error("environment: RANK = " + std::to_string(env.rank) +
                             " with WORLD_SIZE = " + std::to_string(env.worldSize) +
                             ": expected 0 <= RANK < WORLD_SIZE");
  }
  return env;
}

}  // namespace stagescope::engine
