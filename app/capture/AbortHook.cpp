#include "app/capture/AbortHook.h"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>

#include "app/capture/CaptureSession.h"

namespace stagescope::capture {

namespace {

std::terminate_handler previousHandler = nullptr;
std::atomic<bool> ran{false};

[[noreturn]] void onTerminate() {
  if (!ran.exchange(true)) CaptureSession::instance().aborted(currentExceptionText());
  if (previousHandler) previousHandler();
  std::abort();
}

}  // namespace

std::string currentExceptionText() {
  const std::exception_ptr e = std::current_exception();
  if (!e) return "std::terminate without an active exception";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

void installAbortHook() {
  static std::once_flag once;
  std::call_once(once, [] { previousHandler = std::set_terminate(onTerminate); });
}

}  // namespace stagescope::capture
