// When a rank pre-posts the next action's receives (core/engine/PrepostPolicy.h): forced by
// STAGESCOPE_PREPOST=1/0, otherwise only while every rank of the host has a core (or a GPU
// computes), and a value that is none of 1, 0, auto is one line naming the variable.
#include <gtest/gtest.h>

#include <sched.h>

#include <stdexcept>

#include "core/engine/PrepostPolicy.h"

namespace stagescope::engine {
namespace {

PrepostInputs inputs(int ranksOnHost, int cores, bool accelerator = false) {
  PrepostInputs in;
  in.ranksOnHost = ranksOnHost;
  in.cores = cores;
  in.accelerator = accelerator;
  return in;
}

TEST(PrepostPolicy, AutoPrepostsOnlyWhileEachRankHasACore) {
  EXPECT_TRUE(prepostReceives(inputs(2, 2)));
  EXPECT_TRUE(prepostReceives(inputs(8, 64)));
  EXPECT_FALSE(prepostReceives(inputs(4, 2)));
  EXPECT_FALSE(prepostReceives(inputs(128, 16)));
  PrepostInputs in = inputs(4, 2);
  in.setting = "auto";
  EXPECT_FALSE(prepostReceives(in));
}

TEST(PrepostPolicy, AGpuComputesSoSharedCoresDoNotMatter) {
  EXPECT_TRUE(prepostReceives(inputs(8, 2, /*accelerator=*/true)));
}

TEST(PrepostPolicy, TheSettingForcesEitherWay) {
  PrepostInputs in = inputs(4, 2);
  in.setting = "1";
  EXPECT_TRUE(prepostReceives(in));
  in = inputs(1, 8, true);
  in.setting = "0";
  EXPECT_FALSE(prepostReceives(in));
}

TEST(PrepostPolicy, AnyOtherSettingIsOneLineNamingTheVariable) {
  PrepostInputs in = inputs(1, 8);
  in.setting = "yes";
  try {
    prepostReceives(in);
    FAIL() << "accepted STAGESCOPE_PREPOST=yes";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(),
                 "environment variable STAGESCOPE_PREPOST = 'yes': expected 1, 0 or auto");
  }
}

TEST(PrepostPolicy, UsableCoresCountsThisProcessesAffinity) {
  const int n = usableCores();
  EXPECT_GE(n, 1);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(n, CPU_COUNT(&set));
}

}  // namespace
}  // namespace stagescope::engine
