// Where this process sits in the job, read from the environment conventions torchrun and
// Slurm users already have: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, with
// SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID as fallbacks.  Torch-free.
#pragma once

#include <string>

namespace stagescope::engine {

struct RankEnv {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  // Processes of this job on this host (LOCAL_WORLD_SIZE, as torchrun sets it; WORLD_SIZE when
  // unset, i.e. assume every rank shares this host's cores).
  int localWorldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  // True when the store server is hosted by the local launcher (stagescope run); otherwise
  // rank 0 hosts it, as under torchrun/Slurm.
  bool launcherHostsStore = false;
  // torchrun's elastic agent hosts the store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): no rank hosts it; keys live under an attempt prefix.
  bool agentHostsStore = false;
  int restartCount = 0;   // TORCHELASTIC_RESTART_COUNT: which attempt of an elastic job
  std::string errorFile;  // TORCHELASTIC_ERROR_FILE: where a failing rank reports why
  bool hostsStore() const { return rank == 0 && !launcherHostsStore && !agentHostsStore; }
};

// Reads the environment.  Throws std::runtime_error naming the variable and its value when
// a variable is present but not a valid number, or rank >= world size.
RankEnv readRankEnv();

}  // namespace stagescope::engine
