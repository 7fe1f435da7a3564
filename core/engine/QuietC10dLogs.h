// PyTorch's C++ logger held quiet while a store is connected or waited on.
#pragma once

#include <c10/util/Logging.h>

#include <algorithm>
#include <cstdlib>

namespace stagescope::engine {

// While a store connects or a rank waits on it, PyTorch's C++ logger is quiet: c10d logs each
// failed attempt and each wait that runs out itself ("Exception raised from throwTimeoutError
// at .../socket.cpp:1030 ... frame #0: ...", "[W... socket.cpp:494] [c10d] waitForInput:
// socket ... timed out after 3000ms"), before the one line stagescope throws says what
// happened.  A user who asked for PyTorch's logs (TORCH_CPP_LOG_LEVEL) gets them.  Scoped:
// the level is restored when the object goes.
class QuietC10dLogs {
 public:
  QuietC10dLogs()
      : saved_(FLAGS_caffe2_log_level), quiet_(std::getenv("TORCH_CPP_LOG_LEVEL") == nullptr) {
    if (quiet_) FLAGS_caffe2_log_level = std::max(saved_, kFatal);
  }
  ~QuietC10dLogs() {
    if (quiet_) FLAGS_caffe2_log_level = saved_;
  }
  QuietC10dLogs(const QuietC10dLogs&) = delete;
  QuietC10dLogs& operator=(const QuietC10dLogs&) = delete;

 private:
  static constexpr int kFatal = 3;  // c10's levels: 0 info, 1 warning, 2 error, 3 fatal
  int saved_;
  bool quiet_;
};

}  // namespace stagescope::engine
