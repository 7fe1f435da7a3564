#include "core/engine/RankEnv.h"

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

int intFrom(std::initializer_list<const char*> names, int fallback) {
  const char* which = nullptr;
  const char* text = firstSet(names, &which);
  if (text == nullptr) return fallback;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0 || v > 1 << 24) {
    throw std::runtime_error(std::string("environment variable ") + which + " = '" + text +
                             "': expected a non-negative integer");
  }
  return static_cast<int>(v);
}

}  // namespace

RankEnv readRankEnv() {
  RankEnv env;
  env.rank = intFrom({"RANK", "SLURM_PROCID"}, 0);
  env.worldSize = intFrom({"WORLD_SIZE", "SLURM_NTASKS"}, 1);
  env.localRank = intFrom({"LOCAL_RANK", "SLURM_LOCALID"}, env.rank);
  env.masterPort = intFrom({"MASTER_PORT"}, 29500);
  const char* which = nullptr;
  if (const char* addr = firstSet({"MASTER_ADDR"}, &which)) env.masterAddr = addr;
  if (const char* l = std::getenv("STAGESCOPE_LAUNCHER_STORE")) env.launcherHostsStore = *l == '1';
  if (const char* a = std::getenv("TORCHELASTIC_USE_AGENT_STORE"))
    env.agentHostsStore = std::string(a) == "True" || std::string(a) == "true" || *a == '1';
  env.restartCount = intFrom({"TORCHELASTIC_RESTART_COUNT"}, 0);
  if (const char* f = firstSet({"TORCHELASTIC_ERROR_FILE"}, &which)) env.errorFile = f;
  if (env.worldSize < 1 || env.rank >= env.worldSize) {
    throw std::runtime_error("environment: RANK = " + std::to_string(env.rank) +
                             " with WORLD_SIZE = " + std::to_string(env.worldSize) +
                             ": expected 0 <= RANK < WORLD_SIZE");
  }
  return env;
}

}  // namespace stagescope::engine
