// Bridge leaders, boundaries and comm maps (schedule.md §3.2, §3.3, §10.5-10.6) and global
// stages (§4.5, §10.11, right alignment of §7.5).
#include <gtest/gtest.h>

#include "core/plan/Topology.h"
#include "tests/plan/PlanTestUtil.h"

namespace stagescope::plan {
namespace {

using Lists = std::vector<std::vector<int>>;
using Ranks = std::vector<int>;

ModuleConfig grid(const std::string& name, int tp, int pp, int dp, int offset) {
  ModuleConfig m;
  m.name = name;
  m.tp = tp;
  m.pp = pp;
  m.dp = dp;
  m.offset = offset;
  return m;
}

struct LeaderRow {
  int tp, pp, dp;
  Lists srcBoundary, destBoundary;
  Ranks srcLeaders, destLeaders;
};

class LeaderTable : public ::testing::TestWithParam<LeaderRow> {};

TEST_P(LeaderTable, MatchesReferenceSection3_2) {  // §10.5
  const LeaderRow& row = GetParam();
  ModuleConfig m = grid("a", row.tp, row.pp, row.dp, 0);
  Bridge b = makeBridge(m, m, 8);
  EXPECT_EQ(b.srcBoundary, row.srcBoundary);
  EXPECT_EQ(b.destBoundary, row.destBoundary);
  EXPECT_EQ(b.srcLeaders, row.srcLeaders);
  EXPECT_EQ(b.destLeaders, row.destLeaders);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, LeaderTable,
    ::testing::Values(
        LeaderRow{2, 2, 2, {{2, 3}, {6, 7}}, {{0, 1}, {4, 5}}, {3, 7}, {0, 4}},
        LeaderRow{4, 2, 1, {{4, 5, 6, 7}}, {{0, 1, 2, 3}}, {7}, {0}},
        LeaderRow{1, 2, 4, {{1}, {3}, {5}, {7}}, {{0}, {2}, {4}, {6}}, {1, 3, 5, 7}, {0, 2, 4, 6}},
        LeaderRow{2, 4, 1, {{6, 7}}, {{0, 1}}, {7}, {0}}));

TEST(Bridge, FanInTp2Dp2ToTp4Dp1) {  // §3.3 row 1
  Bridge b = makeBridge(grid("a", 2, 1, 2, 0), grid("b", 4, 1, 1, 4), 8);
  EXPECT_TRUE(b.fanIn());
  EXPECT_EQ(b.peersOf(4), (Ranks{1, 3}));
  EXPECT_EQ(b.peersOf(1), (Ranks{4}));
  EXPECT_EQ(b.peersOf(3), (Ranks{4}));
  EXPECT_EQ(b.srcBoundary, (Lists{{0, 1}, {2, 3}}));
  EXPECT_EQ(b.destBoundary, (Lists{{4, 5, 6, 7}}));
  EXPECT_EQ(b.roleOf(4), BridgeRankRole::Receiver);
  EXPECT_EQ(b.roleOf(1), BridgeRankRole::Sender);
  EXPECT_EQ(b.roleOf(0), BridgeRankRole::Member);
  EXPECT_EQ(b.roleOf(5), BridgeRankRole::Member);
  EXPECT_TRUE(b.peersOf(0).empty());
  EXPECT_EQ(b.localLeaderOf(0), 1);
  EXPECT_EQ(b.localLeaderOf(6), 4);
  EXPECT_EQ(b.boundaryOf(2), (Ranks{2, 3}));
}

TEST(Bridge, FanOutTp4Dp1ToTp2Dp2) {  // §3.3 row 2
  Bridge b = makeBridge(grid("a", 4, 1, 1, 0), grid("b", 2, 1, 2, 4), 8);
  EXPECT_TRUE(b.fanOut());
  EXPECT_EQ(b.peersOf(3), (Ranks{4, 6}));
  EXPECT_EQ(b.peersOf(4), (Ranks{3}));
  EXPECT_EQ(b.peersOf(6), (Ranks{3}));
  EXPECT_EQ(b.destBoundary, (Lists{{4, 5}, {6, 7}}));
  EXPECT_EQ(b.localLeaderOf(7), 6);
}

TEST(Bridge, FanOutTp2Dp2ToTp1Dp4) {  // §3.3 row 3
  Bridge b = makeBridge(grid("a", 2, 1, 2, 0), grid("b", 1, 1, 4, 4), 8);
  EXPECT_EQ(b.peersOf(1), (Ranks{4, 5}));
  EXPECT_EQ(b.peersOf(3), (Ranks{6, 7}));
  EXPECT_EQ(b.peersOf(6), (Ranks{3}));
}

TEST(Bridge, FanInTp1Dp4ToTp4Dp1) {  // §3.3 row 4
  Bridge b = makeBridge(grid("a", 1, 1, 4, 0), grid("b", 4, 1, 1, 4), 8);
  EXPECT_EQ(b.peersOf(4), (Ranks{0, 1, 2, 3}));
  for (int r : {0, 1, 2, 3}) EXPECT_EQ(b.peersOf(r), (Ranks{4}));
}

TEST(Bridge, OneToOneEightRankScheduleTest) {  // §3.3 row 5
  Bridge b = makeBridge(grid("enc", 2, 2, 1, 0), grid("llm", 2, 2, 1, 4), 8);
  EXPECT_FALSE(b.fanIn());
  EXPECT_FALSE(b.fanOut());
  EXPECT_EQ(b.name, "enc->llm");
  EXPECT_EQ(b.peersOf(3), (Ranks{4}));
  EXPECT_EQ(b.peersOf(4), (Ranks{3}));
  EXPECT_EQ(b.srcBoundary, (Lists{{2, 3}}));
  EXPECT_EQ(b.destBoundary, (Lists{{4, 5}}));
}

TEST(Bridge, NonDividingDpIsAnErrorNamingBothModules) {  // §10.6
  try {
    makeBridge(grid("enc", 1, 1, 2, 0), grid("llm", 1, 1, 3, 2), 5);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("enc"), std::string::npos) << what;
    EXPECT_NE(what.find("llm"), std::string::npos) << what;
    EXPECT_NE(what.find("divide one another"), std::string::npos) << what;
  }
}

TEST(Topology, TotalStagesAndGlobalStagesTwoEncoders) {  // §10.11 without the generator
  using testing::moduleToml;
  RunConfig c = testing::makeConfig(moduleToml("image", "encoder", 1, 1, 1, 0, 2) +
                                        moduleToml("audio", "encoder", 1, 1, 1, 1, 2) +
                                        moduleToml("llm", "llm", 1, 2, 1, 2, 2),
                                    4);
  Topology t(c);
  EXPECT_EQ(t.totalStages(), 3);
  EXPECT_EQ(t.globalStage("image", 0), 0);
  EXPECT_EQ(t.globalStage("audio", 0), 0);
  EXPECT_EQ(t.globalStage("llm", 0), 1);
  EXPECT_EQ(t.globalStage("llm", 1), 2);
  EXPECT_TRUE(t.isSource("image"));
  EXPECT_FALSE(t.isSource("llm"));
  EXPECT_TRUE(t.isSink("llm"));
  ASSERT_EQ(t.bridges().size(), 2u);
  EXPECT_EQ(t.bridges()[0].name, "image->llm");
  EXPECT_EQ(t.bridges()[1].name, "audio->llm");
  EXPECT_EQ(t.bridgesInto("llm").size(), 2u);
}

TEST(Topology, ShorterEncoderIsRightAligned) {  // §7.5 fix
  using testing::moduleToml;
  RunConfig c = testing::makeConfig(moduleToml("vision", "encoder", 1, 3, 1, 0, 3) +
                                        moduleToml("audio", "encoder", 1, 1, 1, 3, 2) +
                                        moduleToml("llm", "llm", 1, 2, 1, 4, 2),
                                    8);
  Topology t(c);
  EXPECT_EQ(t.totalStages(), 5);
  EXPECT_EQ(t.firstStageOf("vision"), 0);
  EXPECT_EQ(t.firstStageOf("audio"), 2);
  EXPECT_EQ(t.globalStage("vision", 2), t.firstStageOf("llm") - 1);
  EXPECT_EQ(t.globalStage("audio", 0), t.firstStageOf("llm") - 1);
  EXPECT_EQ(t.warmup("audio", 0, 8), t.warmup("vision", 2, 8));
  EXPECT_EQ(t.warmup("audio", 0, 8), 2);
}

TEST(Topology, LlmOnly) {
  RunConfig c = testing::llmOnly(4, 8);
  Topology t(c);
  EXPECT_EQ(t.totalStages(), 4);
  EXPECT_TRUE(t.bridges().empty());
  EXPECT_TRUE(t.isSource("llm"));
  EXPECT_TRUE(t.isSink("llm"));
  EXPECT_EQ(t.grid("llm").size(), 4);
}

}  // namespace
}  // namespace stagescope::plan
