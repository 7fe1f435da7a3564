// A captured job's declared-schedule cause (core/analysis/PlanConformance.h ScheduleCause): the
// whole sentence and the first line's brief form are made from its parts, so a part that itself
// holds " (§" is never cut.
#include <gtest/gtest.h>

#include <string>

#include "core/analysis/PlanConformance.h"

namespace stagescope::analysis {
namespace {

TEST(ScheduleCause, TheWholeSentenceAndTheBriefAreMadeOfItsParts) {
  const ScheduleCause c{2,
                        "audio stage 0 (rank 2): the job's warmup is 3 where the plan has 2; the "
                        "job places it at global stage 0 of 4, the plan at 1 of 4",
                        "§7.5", "the plan right-aligns a shorter branch next to the first stage"};
  EXPECT_EQ(c.line(), c.what +
                          " (§7.5: the plan right-aligns a shorter branch next to the first "
                          "stage)");
  EXPECT_EQ(c.brief(), c.what + " (§7.5)");
}

// What differs may itself hold " (§" (a module's name is the job's): the brief keeps it whole
// (cutting the sentence at its first " (§" would have ended it inside the name).
TEST(ScheduleCause, ABriefKeepsWhatDiffersWhole) {
  const ScheduleCause c{0, "enc (§2) stage 0 (rank 0): the job's warmup is 2 where the plan has 1",
                        "§7.5", "why"};
  EXPECT_EQ(c.brief(), c.what + " (§7.5)");
  EXPECT_EQ(c.line(), c.what + " (§7.5: why)");
}

// With no section to cite, both are what differs alone.
TEST(ScheduleCause, WithoutASectionBothAreWhatDiffers) {
  const ScheduleCause c{1, "llm stage 1 (rank 1): the job's warmup is 0 where the plan has 1", "",
                        ""};
  EXPECT_EQ(c.line(), c.what);
  EXPECT_EQ(c.brief(), c.what);
}

}  // namespace
}  // namespace stagescope::analysis
