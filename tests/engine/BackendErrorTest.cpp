// backendReason: a backend's failure as the one line a user reads in check, the banner and the
// inspector.  A real c10::Error (TORCH_CHECK, as c10d's Work::wait throws its timeout) carries
// a C++ backtrace; Gloo's messages start with their source location.
#include <gtest/gtest.h>

#include <c10/util/Exception.h>

#include <stdexcept>
#include <string>

#include "core/engine/BackendError.h"

namespace stagescope::engine {
namespace {

std::string reasonOfTorchCheck() {
  try {
    TORCH_CHECK(false, "Operation timed out!");
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("Exception raised from"), std::string::npos)
        << "the fixture is meant to carry a backtrace: " << e.what();
    return backendReason(e);
  }
  return "";
}

TEST(BackendReason, ATorchErrorLosesItsBacktrace) {
  EXPECT_EQ(reasonOfTorchCheck(), "Operation timed out!");
}

TEST(BackendReason, GloosSourceLocationIsDropped) {
  const std::runtime_error closed(
      "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer "
      "[127.0.0.1]:915");
  EXPECT_EQ(backendReason(closed), "Connection closed by peer [127.0.0.1]:915");
  const std::runtime_error timedOut(
      "[/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
      "5000ms for recv operation to complete");
  EXPECT_EQ(backendReason(timedOut), "Timed out waiting 5000ms for recv operation to complete");
}

TEST(BackendReason, OtherTextIsKeptToItsFirstLineAndBounded) {
  // A bracket that is not a source location stays.
  EXPECT_EQ(backendReason(std::runtime_error("[rank 3] lost\nsecond line")), "[rank 3] lost");
  EXPECT_EQ(backendReason(std::runtime_error(std::string(500, 'x'))).size(), 200u);
  EXPECT_EQ(backendReason(std::runtime_error("")), "");
}

TEST(BackendReason, AMessageTakenFromItsExceptionReadsTheSame) {
  EXPECT_EQ(backendReason(std::string("Operation timed out!\nException raised from wait at "
                                      "/pytorch/torch/csrc/distributed/c10d/Work.cpp:93")),
            "Operation timed out!");
  EXPECT_EQ(backendReason(std::string("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:547] "
                                      "Connection closed by peer [127.0.0.1]:915")),
            "Connection closed by peer [127.0.0.1]:915");
}

}  // namespace
}  // namespace stagescope::engine
