// The one "did you mean" rule (core/events/Suggest.h) and the one cap on echoed values
// (events::shownValue in core/events/Printable.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/events/Printable.h"
#include "core/events/Suggest.h"

namespace stagescope::events {
namespace {

const std::vector<std::string> kCommands = {"run",     "worker", "plan",  "check",
                                            "compare", "export", "merge", "gui"};

TEST(Suggest, EditDistanceCountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(editDistance("check", "check"), 0u);
  EXPECT_EQ(editDistance("chek", "check"), 1u);       // a deletion
  EXPECT_EQ(editDistance("checkk", "check"), 1u);     // an insertion
  EXPECT_EQ(editDistance("chock", "check"), 1u);      // a substitution
  EXPECT_EQ(editDistance("comapre", "compare"), 1u);  // two adjacent bytes swapped
  EXPECT_EQ(editDistance("", "run"), 3u);
  EXPECT_EQ(editDistance("kitten", "sitting"), 3u);
}

TEST(Suggest, NamesTheClosestCandidateOnlyWhenCloseEnough) {
  EXPECT_EQ(closestName("chek", kCommands), "check");
  EXPECT_EQ(closestName("comapre", kCommands), "compare");
  EXPECT_EQ(closestName("iteratons", {"seed", "iterations", "microbatches"}), "iterations");
  EXPECT_EQ(closestName("frobnicate", kCommands), std::nullopt);
  EXPECT_EQ(closestName("xyz", kCommands), std::nullopt);    // 3 bytes: one edit at most
  EXPECT_EQ(closestName("check", kCommands), std::nullopt);  // not a typo
  EXPECT_EQ(closestName("", kCommands), std::nullopt);
  EXPECT_EQ(closestName(std::string(100000, 'x'), kCommands), std::nullopt);
  EXPECT_EQ(didYouMean("mrege", kCommands), "; did you mean 'merge'?");
  EXPECT_EQ(didYouMean("frobnicate", kCommands), "");
}

TEST(ShownValue, KeepsShortValuesAndEscapesControlCharacters) {
  EXPECT_EQ(shownValue("seed=1"), "seed=1");
  EXPECT_EQ(shownValue("a\x1b[31mb\nc"), "a\\x1B[31mb\\x0Ac");
  EXPECT_EQ(shownValue(std::string(kMaxShownBytes, 'x')), std::string(kMaxShownBytes, 'x'));
}

TEST(ShownValue, CapsALongValueToItsHeadTailAndSize) {
  const std::string value = "seed=" + std::string(120000, 'x') + "END";
  const std::string shown = shownValue(value);
  EXPECT_LT(shown.size(), 260u);
  EXPECT_EQ(shown.rfind("seed=xxx", 0), 0u) << shown;
  EXPECT_NE(shown.find("\xE2\x80\xA6"), std::string::npos) << shown;  // "…"
  EXPECT_NE(shown.find("xxEND (120008 bytes)"), std::string::npos) << shown;
  // Never half a UTF-8 character at either cut, and control characters escaped in both parts.
  const std::string wide =
      std::string(149, 'a') + "\xC3\xA9" + std::string(200, '\x01') + "\xC3\xA9";
  const std::string s = shownValue(wide);
  EXPECT_EQ(
      s, std::string(149, 'a') + "\xE2\x80\xA6" + [] {
        std::string t;
        for (int i = 0; i < 48; ++i) t += "\\x01";
        return t;
      }() + "\xC3\xA9 (353 bytes)");
}

}  // namespace
}  // namespace stagescope::events
