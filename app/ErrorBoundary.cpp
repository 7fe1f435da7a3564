#include "app/ErrorBoundary.h"

#ifdef STAGESCOPE_LINKS_LIBTORCH  // stagescope-engine (app/CMakeLists.txt)
#include <c10/util/Exception.h>
#endif

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "app/FaultFlag.h"
#include "core/analysis/Check.h"
#include "core/events/Printable.h"
#include "core/plan/Config.h"
#include "storage/OutputPolicy.h"
#include "storage/RunFileLock.h"

namespace stagescope::app {

std::string oneLine(const std::exception& e) {
  std::string message = e.what();
#ifdef STAGESCOPE_LINKS_LIBTORCH
  if (const auto* torchError = dynamic_cast<const c10::Error*>(&e)) {
    message = torchError->what_without_backtrace();
  }
#endif
  if (message != e.what()) message = message.substr(0, message.find('\n'));  // torch: line 1
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  // Paths and values inside the message may hold newlines or escape sequences.
  message = events::printableLine(message);
  return message.empty() ? std::string("internal error (an exception without a message)") : message;
}

namespace {

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
  return code;
}

// Standard output that could not be written (`check > /dev/full`, a full disk) fails the
// command: exit 1 with one line, never a silent exit 0 over a truncated report. A reader that
// went away (`| head -n 1`: the pipe reports POLLERR) is not a failure: what was asked for
// was done, and only its output was not wanted.
int checkStandardOutput(int code) {
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (flushed && !std::ferror(stdout)) return code;
  pollfd out{STDOUT_FILENO, 0, 0};
  if (::poll(&out, 1, 0) == 1 && (out.revents & POLLERR) != 0) return code;  // reader gone
  const std::string why = flushed ? "a write failed" : std::strerror(error);
  fail("standard output could not be written (" + why + "); what was printed is incomplete",
       analysis::exit_code::kError);
  return code == 0 ? analysis::exit_code::kError : code;
}

}  // namespace

int guarded(const std::function<int()>& command) {
  using analysis::exit_code::kError;
  using analysis::exit_code::kUsage;
  try {
    return checkStandardOutput(command());
  } catch (const UsageError& e) {
    return fail(oneLine(e), kUsage);
  } catch (const storage::OutputRefused& e) {
    return fail(oneLine(e), kUsage);
  } catch (const plan::ConfigError& e) {
    return fail(oneLine(e), kUsage);
  } catch (const FaultFlagError& e) {
    return fail(oneLine(e), kUsage);
  } catch (const storage::RunFileBusy& e) {
    return fail(oneLine(e), kError);
  } catch (const std::bad_alloc&) {
    return fail("out of memory (an allocation failed); nothing was written after that point",
                kError);
  } catch (const std::exception& e) {
    return fail(oneLine(e), kError);
  } catch (...) {
    return fail("internal error (an unknown exception)", kError);
  }
}

void installLastResorts() {
  std::signal(SIGXFSZ, SIG_IGN);
  std::set_terminate([] {
    std::string message = "internal error (terminate without an exception)";
    if (auto current = std::current_exception()) {
      try {
        std::rethrow_exception(current);
      } catch (const std::exception& e) {
        message = "internal error: " + oneLine(e);
      } catch (...) {
        message = "internal error (an unknown exception)";
      }
    }
    std::fprintf(stderr, "error: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(analysis::exit_code::kError);
  });
}

}  // namespace stagescope::app
