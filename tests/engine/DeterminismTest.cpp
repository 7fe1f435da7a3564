// Same config and seed: bitwise-identical runs on CPU.  Different layouts of one model:
// the same losses (within 1e-6 relative).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "storage/RunReader.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

std::map<std::tuple<int, std::string, int, int, int>, uint64_t> gradientChecksums(
    const storage::RunModel& run) {
  std::map<std::tuple<int, std::string, int, int, int>, uint64_t> out;
  for (const auto& g : run.gradients) {
    if (g.phase == events::GradPhase::Reduced) out[{g.iteration, g.param, g.tp, g.pp, g.dp}] = g.checksum;
  }
  return out;
}

TEST(Determinism, SameConfigAndSeedGiveBitwiseIdenticalRuns) {
  RunOutput a = runStagescope(assetConfig("default"), {}, "det-a");
  RunOutput b = runStagescope(assetConfig("default"), {}, "det-b");
  ASSERT_EQ(a.exitCode, 0) << a.output;
  ASSERT_EQ(b.exitCode, 0) << b.output;
  auto ra = storage::loadRun(a.runPath), rb = storage::loadRun(b.runPath);
  ASSERT_EQ(ra.transfers.size(), rb.transfers.size());
  ASSERT_GT(ra.transfers.size(), 0u);
  for (size_t i = 0; i < ra.transfers.size(); ++i) {
    EXPECT_EQ(ra.transfers[i].checksum, rb.transfers[i].checksum) << "transfer " << i;
    EXPECT_NE(ra.transfers[i].checksum, 0u);
  }
  auto ga = gradientChecksums(ra), gb = gradientChecksums(rb);
  ASSERT_FALSE(ga.empty());
  EXPECT_EQ(ga, gb);
  auto la = iterationLosses(ra, false), lb = iterationLosses(rb, false);
  EXPECT_EQ(la, lb);
}

TEST(Determinism, DifferentSeedsDiffer) {
  RunOutput a = runStagescope(assetConfig("default"), {}, "seed-a");
  RunOutput b = runStagescope(assetConfig("default"), {"--set", "seed=99"}, "seed-b");
  ASSERT_EQ(a.exitCode, 0) << a.output;
  ASSERT_EQ(b.exitCode, 0) << b.output;
  auto la = iterationLosses(storage::loadRun(a.runPath), false);
  auto lb = iterationLosses(storage::loadRun(b.runPath), false);
  ASSERT_EQ(la.size(), 2u);
  EXPECT_NE(la[0], lb[0]);
}

TEST(LayoutIndependence, DifferentLayoutsOfOneModelGiveTheSameLosses) {
  RunOutput a = runStagescope(assetConfig("default"), {}, "layout-a");
  // Same model and seed, everything on other ranks: vision tp1 dp1 on rank 0, llm pp4 on 1-4.
  RunOutput b = runStagescope(assetConfig("default"),
                              {"--set", "modules.vision.tp=1", "--set", "modules.vision.dp=1",
                               "--set", "modules.llm.offset=1", "--set", "modules.llm.tp=1",
                               "--set", "modules.llm.pp=4"},
                              "layout-b");
  ASSERT_EQ(a.exitCode, 0) << a.output;
  ASSERT_EQ(b.exitCode, 0) << b.output;
  auto la = iterationLosses(storage::loadRun(a.runPath), false);
  auto lb = iterationLosses(storage::loadRun(b.runPath), false);
  ASSERT_EQ(la.size(), 2u);
  for (auto& [it, loss] : la) EXPECT_NEAR(loss, lb[it], 1e-6 * std::abs(loss)) << "iteration " << it;
}

}  // namespace
}  // namespace stagescope::testing
