// Rank processes forked from the launcher without exec, so that they share its memory.
//
// Why: every process that loads LibTorch builds the operator registry in its static
// initialisers (~50 MB of heap, measured with heaptrack: Dispatcher::findOrRegisterName_,
// schema inference, kernel tables).  A rank started with fork+exec builds its own copy; a rank
// forked from the launcher, which built it already, shares those pages copy-on-write and only
// pays for what it writes.  Measured (tests/bench/rank_memory.py, tiny model, 8..128 ranks):
// private pages per rank 61-62 MB exec'd vs 2.3-3.4 MB forked; Pss 63-68 MB vs 4.3-12 MB.
//
// Contract:
//  - fork() is only safe from a single-threaded process (a forked child gets one thread and
//    the other threads' locks as they were).  prefork() therefore runs before the launcher
//    starts its rendezvous store (a server thread) and returns nullptr when the process
//    already has more than one thread, or when STAGESCOPE_EXEC_RANKS=1 asks for the exec path;
//    the caller then starts ranks with fork+exec as before.  CUDA cannot be used in a forked
//    child of a process that initialised it: the caller only preforks for device = "cpu".
//  - Each child waits, blocked on a pipe, until release() sends it its environment (RANK,
//    WORLD_SIZE, MASTER_PORT, ... as NUL-terminated "KEY=VALUE" strings, an empty string
//    last); it then replaces its environment with exactly that, like execve would, and runs
//    the worker function; its return value is the exit code.  A child whose pipe closes
//    before a complete environment arrived exits 0 without running anything.
//  - The child looks like an exec'd rank to the launcher: its own process group, SIGKILL when
//    the launcher dies (PR_SET_PDEATHSIG), default SIGINT/SIGTERM, stdout/stderr on pipes the
//    launcher reads, stdin /dev/null, every close-on-exec descriptor of the launcher closed.
//  - Destroying a pool whose ranks were never released ends them (their pipes close) and
//    reaps them: no process is left behind when the launcher fails before the launch.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace stagescope::engine {

struct PreforkedRank {
  pid_t pid = -1;
  int go = -1;   // write end: the environment goes here
  int out = -1;  // read ends of the rank's stdout and stderr
  int err = -1;
};

class PreforkedRanks {
 public:
  // Forks `worldSize` children that wait for release(); nullptr when forking is not safe or
  // not wanted (see the contract above).  Throws when fork() or pipe() fails.
  static std::unique_ptr<PreforkedRanks> prefork(int worldSize, std::function<int()> worker);
  ~PreforkedRanks();
  PreforkedRanks(const PreforkedRanks&) = delete;
  PreforkedRanks& operator=(const PreforkedRanks&) = delete;

  int size() const { return static_cast<int>(ranks_.size()); }
  // Sends rank `rank` its environment and hands its process to the caller (who then owns
  // out/err and reaps the pid).  Throws when the child is gone.
  PreforkedRank release(int rank, const std::vector<std::string>& env);

 private:
  PreforkedRanks() = default;
  std::vector<PreforkedRank> ranks_;
  std::vector<bool> released_;
};

// Threads of this process (entries of /proc/self/task); -1 when unknown.
int threadCount();

}  // namespace stagescope::engine
