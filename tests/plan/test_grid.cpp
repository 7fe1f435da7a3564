// Grid facts of schedule.md §10.1-10.4.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/plan/Grid.h"

namespace stagescope::plan {
namespace {

using Lists = std::vector<std::vector<int>>;

TEST(Grid, RawAndGroupEnumerationOfDocstringExample) {  // §10.1
  Grid g({2, 2, 2}, {"a", "b", "c"}, 0, 8);
  EXPECT_EQ(g.rawEnumeration({"a", "b"}), (Lists{{0, 2, 1, 3}, {4, 6, 5, 7}}));
  EXPECT_EQ(g.groupEnumeration({"a", "b"}), (Lists{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.groupKey({"a", "b"}), "b-a");
}

TEST(Grid, ModuleGridEnumerations) {  // §10.2
  Grid g = moduleGrid(2, 1, 2, 2, 0, 8);
  EXPECT_EQ(g.groupEnumeration({"tp"}), (Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groupEnumeration({"pp"}), (Lists{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groupEnumeration({"dp"}), (Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groupEnumeration({"dp", "cp"}), (Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groupEnumeration({"tp", "pp"}), (Lists{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.groupKey({"tp", "dp"}), "dp-tp");
  EXPECT_EQ(g.groupKey({"dp", "cp"}), "dp-cp");
  EXPECT_EQ(g.groupKey({"pp"}), "pp");
}

TEST(Grid, EveryGroupAscendingAndPpGroupRankIsPpCoord) {  // §10.2
  Grid g = moduleGrid(2, 1, 2, 2, 0, 8);
  for (auto dims : std::vector<std::vector<std::string>>{
           {"tp"}, {"pp"}, {"dp"}, {"tp", "pp"}, {"dp", "tp"}, {"pp", "dp"}, {"tp", "cp", "pp"}}) {
    for (const auto& group : g.groupEnumeration(dims)) {
      EXPECT_TRUE(std::is_sorted(group.begin(), group.end()));
    }
  }
  for (int r = 0; r < 8; ++r) {
    auto group = g.groupOf({"pp"}, r);
    int index = static_cast<int>(std::find(group.begin(), group.end(), r) - group.begin());
    EXPECT_EQ(index, g.coord(r, "pp")) << "rank " << r;
  }
}

TEST(Grid, CoordsRankRoundTripFirstDimFastest) {  // §1.2
  Grid g = moduleGrid(2, 1, 2, 2, 0, 8);
  EXPECT_EQ(g.coords(5), (std::vector<int>{1, 0, 0, 1}));
  EXPECT_EQ(g.coords(6), (std::vector<int>{0, 0, 1, 1}));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(g.rankOf(g.coords(r)), r);
}

TEST(Grid, OffsetGrid) {  // §10.3
  Grid g = moduleGrid(2, 1, 2, 1, 4, 8);
  EXPECT_EQ(g.groupEnumeration({"tp"}), (Lists{{4, 5}, {6, 7}}));
  EXPECT_EQ(g.groupEnumeration({"pp"}), (Lists{{4, 6}, {5, 7}}));
  EXPECT_EQ(g.groupEnumeration({"dp"}), (Lists{{4}, {5}, {6}, {7}}));
  EXPECT_FALSE(g.contains(3));
  EXPECT_TRUE(g.contains(4));
  EXPECT_FALSE(g.contains(8));
  EXPECT_TRUE(g.groupOf({"tp"}, 3).empty());
  EXPECT_THROW(g.coords(3), std::invalid_argument);
}

TEST(Grid, ConstructionErrorsNameTheValues) {  // §10.4
  auto message = [](auto&& make) {
    try {
      make();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] {
              Grid({2, 2}, {"tp"}, 0, 8);
            }).find("differ in length"),
            std::string::npos);
  EXPECT_NE(message([] { moduleGrid(1, 1, 1, 1, -1, 8); }).find("offset -1"), std::string::npos);
  EXPECT_NE(message([] { moduleGrid(2, 1, 2, 2, 4, 8); }).find("holds 8 ranks"), std::string::npos);
  EXPECT_NE(message([] { moduleGrid(0, 1, 1, 1, 0, 8); }).find("tp = 0"), std::string::npos);
  EXPECT_NE(message([] { Grid({1, 1}, {"a", "a"}, 0, 8); }).find("twice"), std::string::npos);
  // Products past 64 bits are reported, not wrapped into a small (or negative) size.
  const int big = 2147483647;
  EXPECT_NE(message([&] { moduleGrid(big, big, big, big, 0, 8); }).find("more ranks than"),
            std::string::npos);
  EXPECT_NE(message([] { moduleGrid(65536, 1, 1, 65536, 0, 4096); }).find("holds 4294967296"),
            std::string::npos);
  Grid g = moduleGrid(2, 1, 2, 2, 0, 8);
  EXPECT_NE(message([&] { g.groupEnumeration({"ep"}); }).find("unknown grid dimension ep"),
            std::string::npos);
  EXPECT_NE(message([&] { g.rawEnumeration({"tp", "tp"}); }).find("twice"), std::string::npos);
}

}  // namespace
}  // namespace stagescope::plan
