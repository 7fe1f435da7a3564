// Pre-posted receives (Communicator::prepostRecvs, posted before the F/B that precedes their
// action) change when a receive is posted, never what arrives: runs with them on and off
// (STAGESCOPE_PREPOST=1 and 0) are bitwise identical, on layouts with P2P, bridges (fan-in,
// fan-out) and boundary broadcasts, and every message is recorded once on each side.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <tuple>

#include "storage/RunReader.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

class Prepost : public ::testing::TestWithParam<std::string> {};

TEST_P(Prepost, SameRunWithAndWithoutPrepostedReceives) {
  const std::string layout = GetParam();
  ::setenv("STAGESCOPE_PREPOST", "0", 1);
  RunOutput off =
      runStagescope(assetConfig(layout), {"--set", "iterations=3"}, "prepost-off-" + layout);
  ::setenv("STAGESCOPE_PREPOST", "1", 1);  // forced: "auto" is off with more ranks than cores
  RunOutput on =
      runStagescope(assetConfig(layout), {"--set", "iterations=3"}, "prepost-on-" + layout);
  ::unsetenv("STAGESCOPE_PREPOST");
  ASSERT_EQ(off.exitCode, 0) << off.output;
  ASSERT_EQ(on.exitCode, 0) << on.output;
  auto a = storage::loadRun(off.runPath), b = storage::loadRun(on.runPath);
  ASSERT_GT(a.transfers.size(), 0u);
  // The same messages, each once per side, with the same bytes.
  using Key = std::tuple<int, int, int, int, int, int, std::string>;
  auto index = [](const model::RunModel& run) {
    std::map<Key, uint64_t> out;
    for (const auto& t : run.transfers) {
      const Key k{t.iteration,
                  t.microbatch,
                  static_cast<int>(t.direction),
                  static_cast<int>(t.side),
                  t.srcRank,
                  t.dstRank,
                  t.edge};
      EXPECT_TRUE(out.emplace(k, t.checksum).second) << "a message recorded twice: " << t.edge;
    }
    return out;
  };
  EXPECT_EQ(index(a), index(b));
  std::map<std::tuple<int, std::string, int, int, int>, uint64_t> ga, gb;
  for (const auto& g : a.gradients) ga[{g.iteration, g.param, g.tp, g.pp, g.dp}] = g.checksum;
  for (const auto& g : b.gradients) gb[{g.iteration, g.param, g.tp, g.pp, g.dp}] = g.checksum;
  ASSERT_FALSE(ga.empty());
  EXPECT_EQ(ga, gb);
  EXPECT_EQ(iterationLosses(a, false), iterationLosses(b, false));
}

INSTANTIATE_TEST_SUITE_P(Layouts, Prepost,
                         ::testing::Values("default", "llm_pp4", "fan_out", "two_encoders"));

}  // namespace
}  // namespace stagescope::testing
