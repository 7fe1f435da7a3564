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
  int repeat = 1;           // run N times and require bitwise-identical runs (1..1000)
  bool force = false;       // replace an existing run file at `out` (docs/commands.md "Output
                            // files")
  bool keepShards = false;  // keep the rank shards of a completed run (removed by default)
};
int runCommand(const RunOptions& opts);

struct WorkerOptions {
  std::string config;  // resolved TOML (no overrides)
  std::string out;     // run file path (the shard goes next to it)
};
int workerCommand(const WorkerOptions& opts);

int planCommand(const std::string& config, const std::vector<std::string>& overrides);
// Merges shards into RUN.  With `config` and no RUN yet (ranks started by hand or by another
// launcher, e.g. on several hosts), first creates the run file from the config, and after the
// merge marks the run completed when every rank recorded its whole plan, else failed/hung.
// A completed run whose every shard merged is left one file (its shards removed) unless
// `keepShards`.
int mergeCommand(const std::string& run, const std::vector<std::string>& shards,
                 const std::string& config = "", bool keepShards = false);

// Creates the run file of `config` (validated) at `out` with run id `runId` (default: the
// file's name without extension); throws plan::ConfigError.
void createRunFileFor(const std::string& config, const std::string& out,
                      const std::string& runId = "");

}  // namespace stagescope::app
