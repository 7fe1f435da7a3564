// How `stagescope` (the front, which links no LibTorch) hands `run` and `worker` to the engine
// executable `stagescope-engine`: by exec, in the same process, with argv unchanged.  The
// process keeps its pid, environment, open descriptors, signal mask and ignored signals, so the
// exit code, the output, signals sent to it and the launcher's prefork of the ranks before any
// thread (core/engine/PreforkedRanks.h) are exactly those of the engine.
#pragma once

#include <string>

namespace stagescope::app {

// The file name of the engine executable, and where it is expected: next to the running
// executable (/proc/self/exe, symbolic links resolved; never looked up in PATH).
inline constexpr const char* kEngineFileName = "stagescope-engine";
std::string enginePath();

// Replaces this process by the engine with `argv` (argv[0] as given, so help and messages read
// as before).  Returns only when it could not: throws UsageError (exit 2) with one line naming
// the command, the path expected and what is missing.
[[noreturn]] void execEngine(const std::string& command, char** argv);

// The LibTorch line of `stagescope --version`, true of this installation: the LibTorch the
// engine was built with and whether the engine is there.
std::string engineTorchLine();

}  // namespace stagescope::app
