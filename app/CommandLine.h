// The command line of stagescope, defined once for its two executables: `stagescope` (every
// command; links no LibTorch) and `stagescope-engine` (`run` and `worker`, which need the
// engine).  The front parses the whole command line, so help and usage errors are its own, and
// execs the engine for `run` and `worker` with the same arguments (app/EngineExec.h); the engine
// parses them again with these same definitions.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>

#include "app/Commands.h"

namespace stagescope::app {

// The root of the command line: description, exactly one command, `--version` printing
// `version` (versionText()).
std::unique_ptr<CLI::App> newCommandLine(const std::string& version);

// `run CONFIG [...]` and `worker CONFIG --out RUN`, filling `run` / `worker` when parsed.
CLI::App* addRunCommand(CLI::App& cli, RunOptions& run);
CLI::App* addWorkerCommand(CLI::App& cli, WorkerOptions& worker);

// A finite number >= 0 (CLI11 alone accepts "nan", "inf" and negative tolerances).
const CLI::Validator& toleranceValidator();
// A path option given as an empty string would silently mean "the default" or "the cwd".
const CLI::Validator& pathValidator();
// Refuses an empty value: an option given as '' (an unset shell variable) is a mistake, never
// the same as leaving the option out (`check RUN --against ''` checked RUN alone and passed).
const CLI::Validator& nonEmptyValidator();
// `gui --size WIDTHxHEIGHT`: 200x150 .. 16384x16384; false (nothing written) otherwise.
bool parseWindowSize(const std::string& text, int* width, int* height);
const CLI::Validator& windowSizeValidator();

// Parses argv into `cli`.  Returns the exit code when the process is done (no command, help or
// --version printed: 0; an unknown command or a usage error printed as one `error:` line and a
// `usage:` line: exit 2), or nullopt when the parsed command is to be run.
std::optional<int> parseCommandLine(CLI::App& cli, int argc, char** argv);

// `stagescope --version`: stagescope, `torchLine`, SQLite and the run-file format.
std::string versionText(const std::string& torchLine);

}  // namespace stagescope::app
