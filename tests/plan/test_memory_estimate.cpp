// The memory estimate (core/plan/MemoryEstimate.h): what it counts, from the plan, and the
// refusal line `stagescope run` prints.  The parameter counts are compared with the engine's
// real stage models in tests/engine/RankProcessTest.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "core/plan/MemoryEstimate.h"
#include "core/plan/Topology.h"
#include "tests/plan/PlanTestUtil.h"

namespace stagescope::plan {
namespace {

using testing::llmOnly;

MemoryEstimate estimateOf(const RunConfig& c, bool forked = true) {
  Topology t(c);
  return estimateMemory(c, makePlan(c, t), forked);
}

TEST(MemoryEstimate, ActivationsAreHeldForTheMicrobatchesThePlanKeepsInFlight) {
  // 1F1B on pp 4, m 8: stage s holds min(pp - s, m) microbatches at its peak.
  const MemoryEstimate e = estimateOf(llmOnly(4, 8));
  ASSERT_EQ(e.ranks.size(), 4u);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(e.ranks[s].peakMicrobatches, 4 - s) << "stage " << s;
  // With m = 2 no stage can hold more than 2.
  const MemoryEstimate few = estimateOf(llmOnly(4, 2));
  for (int s = 0; s < 4; ++s) EXPECT_EQ(few.ranks[s].peakMicrobatches, std::min(4 - s, 2));
}

TEST(MemoryEstimate, ForwardOnlyKeepsOneMicrobatchAndNoGradientsOrOptimizerState) {
  RunConfig train = testing::makeConfig(testing::moduleToml("llm", "llm", 1, 2, 1, 0, 2), 4);
  RunConfig fwd = testing::makeConfig(testing::moduleToml("llm", "llm", 1, 2, 1, 0, 2), 4, 4, true);
  const MemoryEstimate t = estimateOf(train), f = estimateOf(fwd);
  EXPECT_EQ(f.ranks[0].peakMicrobatches, 1);
  EXPECT_EQ(t.ranks[0].peakMicrobatches, 2);
  // sgd without momentum: value + gradient + flat reduce buffer (3 copies) vs value only.
  EXPECT_DOUBLE_EQ(t.ranks[0].stateBytes, 3 * f.ranks[0].stateBytes);
}

TEST(MemoryEstimate, TotalIsSharedPagesOnceAndEveryRank) {
  const MemoryEstimate e = estimateOf(llmOnly(4, 8));
  double sum = e.sharedBytes;
  for (const auto& r : e.ranks) sum += r.processBytes + r.stateBytes + r.activationBytes;
  EXPECT_DOUBLE_EQ(e.totalBytes(), sum);
  // An exec'd rank costs more than a forked one (it builds its own LibTorch registry).
  EXPECT_GT(estimateOf(llmOnly(4, 8), false).totalBytes(), e.totalBytes());
}

TEST(MemoryEstimate, RefusalIsOneLineWithTheNumbersAndForce) {
  const MemoryEstimate e = estimateOf(llmOnly(4, 8));
  EXPECT_EQ(memoryRefusal(e, e.totalBytes() * 2), "");
  EXPECT_EQ(memoryRefusal(e, -1), "");  // unknown: never refused
  const std::string line = memoryRefusal(e, 1000);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find("estimated peak memory " + formatBytes(e.totalBytes())), std::string::npos)
      << line;
  EXPECT_NE(line.find("exceeds the 1.0 kB available"), std::string::npos) << line;
  EXPECT_NE(line.find("--force"), std::string::npos) << line;
}

TEST(MemoryEstimate, AvailableMemoryIsMemAvailableOfMeminfo) {
  const std::string path = ::testing::TempDir() + "/meminfo";
  std::ofstream(path) << "MemTotal:       24000000 kB\nMemFree:          100 kB\n"
                         "MemAvailable:     2000 kB\n";
  ::setenv("STAGESCOPE_MEMINFO", path.c_str(), 1);
  EXPECT_DOUBLE_EQ(availableMemoryBytes(), 2000 * 1024.0);
  std::ofstream(path) << "garbage\n";
  EXPECT_LT(availableMemoryBytes(), 0);
  ::unsetenv("STAGESCOPE_MEMINFO");
  EXPECT_GT(availableMemoryBytes(), 0);  // the real /proc/meminfo
}

TEST(MemoryEstimate, BytesAreFormattedInPowersOfThousand) {
  EXPECT_EQ(formatBytes(999), "999 B");
  EXPECT_EQ(formatBytes(1500), "1.5 kB");
  EXPECT_EQ(formatBytes(110e6), "110.0 MB");
  EXPECT_EQ(formatBytes(2.5e12), "2.5 TB");
}

}  // namespace
}  // namespace stagescope::plan
