// Shared helpers of the debug suites (fault matrix, crash safety, hostile input).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace stagescope::testing {

std::string debugConfig(const std::string& name);  // tests/debug/configs/<name>.toml

struct CliResult {
  int exitCode = -1;
  std::string output;  // stdout + stderr
  double seconds = 0;
};
// Runs `stagescope ARGS...` (no implicit arguments) with a hard time limit.
CliResult runCli(const std::vector<std::string>& args, int timeoutSeconds = 120);
// The same with another stagescope executable `exe` (e.g. the one that makes fixtures).
CliResult runCliWith(const std::string& exe, const std::vector<std::string>& args,
                     int timeoutSeconds = 120);

// When `exe` (a `stagescope`) or the `stagescope-engine` next to it, which carries out its `run`,
// was last written: what fixture runs made by `exe` are older than when either was rebuilt.
std::filesystem::file_time_type builtAt(const std::string& exe);

// Non-empty lines of `text`.
std::vector<std::string> lines(const std::string& text);

}  // namespace stagescope::testing
