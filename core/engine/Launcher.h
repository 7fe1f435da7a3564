// Spawns and supervises the local ranks of a run (`stagescope run`): one child process per
// rank with the torchrun environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT), their output forwarded line by line with a "[rank N] " prefix, and failure
// propagated: when a rank fails, the others are stopped (SIGTERM, then SIGKILL after a
// grace period) and the result names the rank and the reason.  Torch-free.
#pragma once

#include <string>
#include <vector>

namespace stagescope::engine {

class PreforkedRanks;

// Exit codes of a rank process (`stagescope worker`).
enum WorkerExit : int {
  kWorkerOk = 0,
  kWorkerError = 1,     // an exception: bad input, a crash in the model, I/O
  kWorkerTimeout = 3,   // a wait ran past the timeout (a hang); the rank recorded a diagnosis
  kWorkerMismatch = 4,  // ranks disagree on the run (config, run id, build) at rendezvous
  kWorkerCorrupt = 5,   // a received payload failed in-band verification (TransferCorrupt)
};

struct LaunchSpec {
  std::vector<std::string> argv;  // the worker command line (argv[0] = executable)
  int worldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 0;
  std::vector<std::string> extraEnv;  // "KEY=VALUE"
  double hangGraceSeconds = 5;        // after a rank times out, wait this long for the others
  bool quiet = false;                 // do not forward rank output
  // Ranks already forked from this process (PreforkedRanks.h): each is released with the
  // environment below instead of exec'ing argv.  nullptr: fork+exec argv per rank.
  PreforkedRanks* preforked = nullptr;
};

struct RankExit {
  int rank = -1;
  int exitCode = 0;  // valid when !signaled
  int signal = 0;    // the signal that ended it, 0 if it exited
  bool stoppedByUs = false;
  std::string lastLine;  // last line the rank printed on stderr
  int64_t endedNs = 0;   // when the launcher saw it end (engine::nowNs, the recording clock)
};

struct LaunchResult {
  std::vector<RankExit> ranks;
  bool interrupted = false;  // the launcher got SIGINT/SIGTERM
  int interruptSignal = 0;   // which one
  int firstFailure = -1;     // the first rank that failed on its own, -1 if none
  bool ok() const { return firstFailure < 0 && !interrupted; }
  std::string describe() const;  // one line: "rank 3 was killed by signal 9 (SIGKILL)"
};

LaunchResult launchRanks(const LaunchSpec& spec);

}  // namespace stagescope::engine
