// The one error boundary of every `stagescope` command: whatever goes wrong ends as ONE line
// "error: ..." on stderr and a documented exit code (docs/commands.md "Exit codes (every
// command)"), never an abort.
//
//   exit 2  the command line, the config or an output path was refused (usage errors, a
//           plan::ConfigError, a --fault flag, the output policy)
//   exit 1  anything else that stopped the command: an input that cannot be read, an I/O
//           error (disk full, permission), another run holding the run file's lock, an
//           internal error
#pragma once

#include <exception>
#include <functional>
#include <stdexcept>
#include <string>

namespace stagescope::app {

// A command line that cannot work as given (exit 2): the message says what to give instead.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `command` and turns every exception into one `error:` line and its exit code.
int guarded(const std::function<int()>& command);

// The message of `e` on one line: torch errors without their backtrace, the first line only.
std::string oneLine(const std::exception& e);

// Process-wide last resorts, installed first thing in main: an exception that escapes a
// thread prints one line and exits 1 (instead of "terminate called ..." and exit 134);
// SIGXFSZ (a file size limit, RLIMIT_FSIZE) is ignored so that writing past the limit fails
// with EFBIG, an error the storage layer reports, instead of killing the process.  Ranks
// inherit the ignored signal.
void installLastResorts();

}  // namespace stagescope::app
