// Values the ranks read back from the rendezvous store are checked, not trusted: a hostile or
// corrupted value gives one clear line (RendezvousError naming the key and quoting the value),
// never an uncaught std::stoll exception; a peer's identity with a garbage format version is
// read as -1 (a visible mismatch), not as 0 or undefined behaviour.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "core/engine/Rendezvous.h"
#include "core/engine/RunIdentity.h"

namespace stagescope::engine {
namespace {

using namespace std::chrono_literals;

// Rank 1 of 2 asks rank 0 for its time; the answer is already in the store: `value`.
std::string clockAlignmentErrorFor(const std::string& value) {
  c10d::HashStore store;
  store.set("stagescope/clock/start/1/0/time", std::vector<uint8_t>(value.begin(), value.end()));
  try {
    estimateClockOffset(store, 1, 2, "start", 2s, 1);
  } catch (const RendezvousError& e) {
    EXPECT_EQ(e.kind(), RendezvousError::Kind::Network);
    return e.what();
  }
  return "";
}

TEST(StoreValues, GarbageTimeIsOneClearLine) {
  const std::vector<std::string> bad = {"",
                                        "abc",
                                        "12abc",
                                        " 12",
                                        "99999999999999999999999",
                                        "1e9",
                                        "-",
                                        "\x1b[31mred\x1b[0m",
                                        std::string("12\0003", 4)};
  for (const std::string& value : bad) {
    const std::string what = clockAlignmentErrorFor(value);
    EXPECT_NE(what.find("clock alignment (start): the store holds '"), std::string::npos) << what;
    EXPECT_NE(what.find("under stagescope/clock/start/1/0/time: expected rank 0's time in ns"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find('\x1b'), std::string::npos) << "escape printed raw: " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_NE(clockAlignmentErrorFor("\x1b[31mred").find("\\x1B[31mred"), std::string::npos);
}

TEST(StoreValues, AWholeNumberIsRankZerosTime) {
  for (const std::string good : {"0", "123456789", "-5", "9223372036854775807"}) {
    EXPECT_EQ(clockAlignmentErrorFor(good), "") << good;
  }
}

TEST(StoreValues, GarbageFormatVersionIsMinusOne) {
  RunIdentity id;
  id.runId = "r";
  id.formatVersion = 3;
  EXPECT_EQ(decodeIdentity(encodeIdentity(id)).formatVersion, 3);
  for (const std::string bad : {"", "x", "3x", "99999999999", "-3", "1e3"}) {
    EXPECT_EQ(decodeIdentity("run_id\tr\nformat_version\t" + bad + "\n").formatVersion, -1) << bad;
  }
}

}  // namespace
}  // namespace stagescope::engine
