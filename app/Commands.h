// The subcommands of the `stagescope` executable.  Each returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace stagescope::app {

struct RunOptions {
  std::string config;
  std::vector<std::string> overrides;  // --set key=value
  std::vector<std::string> faults;     // --fault KIND:key=value,... (appended [[faults]])
  std::string out;                     // run file; default runs/<config>-<time>.db
  std::string record;                  // --record LEVEL overrides record.level
  bool reference = false;              // also record the single-process reference
  bool check = false;                  // check the run file afterwards (exit code = check's)
  bool quiet = false;
  int repeat = 1;                      // run N times and require bitwise-identical runs
};
int runCommand(const RunOptions& opts);

struct WorkerOptions {
  std::string config;  // resolved TOML (no overrides)
  std::string out;     // run file path (the shard goes next to it)
};
int workerCommand(const WorkerOptions& opts);

int planCommand(const std::string& config, const std::vector<std::string>& overrides);
int mergeCommand(const std::string& run, const std::vector<std::string>& shards);

}  // namespace stagescope::app
