// The 1F1B plan (schedule.md §5.2, §5.3, §8, §10.12-10.16), its messages, the progress check
// and the renderer.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <tuple>

#include "core/plan/Plan.h"
#include "tests/plan/PlanTestUtil.h"

namespace stagescope::plan {
namespace {

using events::ActionKind;
using events::Direction;
using events::Side;
using testing::moduleToml;

Plan planOf(const RunConfig& c) {
  return makePlan(c, Topology(c));
}

RunConfig asset(const std::string& name) {
  return loadConfig(std::string(STAGESCOPE_CONFIG_DIR) + "/" + name + ".toml");
}

std::vector<std::string> assetNames() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(STAGESCOPE_CONFIG_DIR)) {
    if (e.path().extension() == ".toml") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<int> warmups(const Plan& p) {
  std::vector<int> out;
  for (const auto& r : p.ranks) out.push_back(r.warmup);
  return out;
}

// Order without the trailing DP_REDUCE OPT_STEP.
std::string order(const RankPlan& r) {
  std::string s = orderString(r);
  const std::string tail = " DP_REDUCE OPT_STEP";
  EXPECT_TRUE(s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0)
      << s;
  return s.substr(0, s.size() - tail.size());
}

TEST(Plan, WarmupsTwoRankTest) {  // §10.12
  EXPECT_EQ(warmups(planOf(asset("single"))), (std::vector<int>{1, 0}));
}

TEST(Plan, WarmupsEightRankTest) {  // §10.12
  RunConfig c = testing::makeConfig(
      moduleToml("enc", "encoder", 2, 2, 1, 0, 2) + moduleToml("llm", "llm", 2, 2, 1, 4, 2), 16);
  Plan p = planOf(c);
  EXPECT_EQ(warmups(p), (std::vector<int>{3, 3, 2, 2, 1, 1, 0, 0}));
  EXPECT_EQ(p.totalStages, 4);
  EXPECT_EQ(p.microbatches, 16);
  // The 8-GPU test's bubble, §10.15: (p-1)/(m+p-1) of wall time with p = 4 stages, m = 16
  // (its (p-1)/m = 0.1875 is the same bubble as a fraction of the busy time).
  EXPECT_DOUBLE_EQ(p.expectedBubble(), 3.0 / 19.0);
}

TEST(Plan, WarmupsCappedAtMicrobatches) {  // §10.12
  Plan p = planOf(testing::llmOnly(4, 2));
  EXPECT_EQ(warmups(p), (std::vector<int>{2, 2, 1, 0}));
  EXPECT_EQ(p.ranks[0].steady, 0);
  EXPECT_EQ(p.ranks[0].cooldown, 2);
  EXPECT_EQ(order(p.ranks[0]), "F0 SF F1 SF RB B0 RB B1");
  EXPECT_EQ(checkPlanProgress(p), "");
}

TEST(Plan, ExactOrderPp4M8) {  // §10.13
  Plan p = planOf(testing::llmOnly(4, 8));
  EXPECT_EQ(order(p.ranks[0]),
            "F0 SF F1 SF F2 SF F3 SF_RB B0 F4 SF_RB B1 F5 SF_RB B2 F6 SF_RB B3 F7 SF_RB B4 "
            "RB B5 RB B6 RB B7");
  EXPECT_EQ(order(p.ranks[1]),
            "RF F0 SF RF F1 SF RF F2 SF_RB B0 SB_RF F3 SF_RB B1 SB_RF F4 SF_RB B2 SB_RF "
            "F5 SF_RB B3 SB_RF F6 SF_RB B4 SB_RF F7 SF_RB B5 SB RB B6 SB RB B7 SB");
  EXPECT_EQ(order(p.ranks[2]),
            "RF F0 SF RF F1 SF_RB B0 SB_RF F2 SF_RB B1 SB_RF F3 SF_RB B2 SB_RF F4 SF_RB B3 SB_RF "
            "F5 SF_RB B4 SB_RF F6 SF_RB B5 SB_RF F7 SF_RB B6 SB RB B7 SB");
  EXPECT_EQ(order(p.ranks[3]),
            "RF F0 B0 SB_RF F1 B1 SB_RF F2 B2 SB_RF F3 B3 SB_RF F4 B4 SB_RF F5 B5 SB_RF "
            "F6 B6 SB_RF F7 B7 SB");
  EXPECT_EQ((std::vector<int>{p.ranks[0].warmup, p.ranks[0].steady, p.ranks[0].cooldown}),
            (std::vector<int>{3, 5, 3}));
  EXPECT_EQ((std::vector<int>{p.ranks[1].warmup, p.ranks[1].steady, p.ranks[1].cooldown}),
            (std::vector<int>{2, 6, 2}));
  EXPECT_EQ(checkPlanProgress(p), "");
}

TEST(Plan, CombinedOpsCarryBothMicrobatches) {
  Plan p = planOf(testing::llmOnly(4, 8));
  const Action& a = p.ranks[1].actions[8];  // F2 SF_RB: send act 2, recv grad 0
  ASSERT_EQ(a.kind, ActionKind::SendForwardRecvBackward);
  EXPECT_EQ(a.microbatch, 2);
  EXPECT_EQ(a.gradMicrobatch, 0);
  ASSERT_EQ(a.messages.size(), 2u);
  EXPECT_EQ(a.messages[0].side, Side::Send);
  EXPECT_EQ(a.messages[0].direction, Direction::Activation);
  EXPECT_EQ(a.messages[0].microbatch, 2);
  EXPECT_EQ(a.messages[0].peer, 2);
  EXPECT_EQ(a.messages[0].edge, "llm:pp1->pp2");
  EXPECT_EQ(a.messages[1].side, Side::Recv);
  EXPECT_EQ(a.messages[1].direction, Direction::Gradient);
  EXPECT_EQ(a.messages[1].microbatch, 0);
  EXPECT_EQ(a.messages[1].edge, "llm:pp1->pp2");
}

TEST(Plan, BackwardsInMicrobatchOrderEverywhere) {  // §10.13
  for (const auto& name : assetNames()) {
    Plan p = planOf(asset(name));
    for (const auto& r : p.ranks) {
      std::map<std::string, int> next;  // per stage the rank holds (colocated: several)
      for (const auto& a : r.actions) {
        if (a.kind == ActionKind::Backward) {
          EXPECT_EQ(a.microbatch, next[a.module]++) << name << " " << a.module;
        }
      }
      for (const auto& s : r.stages) {
        EXPECT_EQ(next[s.module], p.microbatches) << name << " rank " << r.rank << " " << s.module;
      }
    }
  }
}

TEST(Plan, PeakStoredActivations) {  // §10.14
  for (auto [pp, m] : std::vector<std::pair<int, int>>{{4, 8}, {4, 2}, {3, 3}, {5, 16}}) {
    Plan p = planOf(testing::llmOnly(pp, m));
    for (const auto& r : p.ranks) {
      int live = 0, peak = 0;
      for (const auto& a : r.actions) {
        if (a.kind == ActionKind::Forward) peak = std::max(peak, ++live);
        if (a.kind == ActionKind::Backward) --live;
      }
      EXPECT_EQ(peak, std::min(pp - r.globalStage, m)) << "p=" << pp << " m=" << m;
      EXPECT_EQ(live, 0);
    }
  }
}

TEST(Plan, ExpectedBubble) {  // §10.15
  Plan p = planOf(testing::llmOnly(4, 8));
  EXPECT_DOUBLE_EQ(p.expectedBubble(), 3.0 / 11.0);
}

// Per (edge, direction, src, dst): send and recv microbatch lists; every send has exactly
// one matching recv and each pair carries m activations and m gradients.
TEST(Plan, MessageCounts) {  // §10.16
  for (const auto& name : assetNames()) {
    Plan p = planOf(asset(name));
    using Key = std::tuple<std::string, int, int, int, int>;  // edge, dir, src, dst, mb
    std::map<Key, int> sends, recvs;
    std::map<std::tuple<std::string, int, int, int>, int> perPair;
    for (const auto& r : p.ranks) {
      for (const auto& a : r.actions) {
        for (const auto& m : a.messages) {
          bool send = m.side == Side::Send;
          int src = send ? r.rank : m.peer, dst = send ? m.peer : r.rank;
          Key k{m.edge, static_cast<int>(m.direction), src, dst, m.microbatch};
          (send ? sends : recvs)[k]++;
          if (send) perPair[{m.edge, static_cast<int>(m.direction), src, dst}]++;
        }
      }
    }
    EXPECT_EQ(sends.size(), recvs.size()) << name;
    for (const auto& [k, n] : sends) {
      EXPECT_EQ(n, 1) << name;
      EXPECT_EQ(recvs.count(k) ? recvs.at(k) : 0, 1) << name << " edge " << std::get<0>(k);
    }
    for (const auto& [k, n] : perPair) EXPECT_EQ(n, p.microbatches) << name << std::get<0>(k);
    // Both directions on every pair.
    for (const auto& [k, n] : perPair) {
      auto mirror = k;
      std::get<1>(mirror) = 1 - std::get<1>(k);
      std::swap(std::get<2>(mirror), std::get<3>(mirror));
      EXPECT_TRUE(perPair.count(mirror)) << name << " " << std::get<0>(k);
    }
  }
}

TEST(Plan, ProgressCheckPassesOnAllAssetsTrainingAndForwardOnly) {
  for (const auto& name : assetNames()) {
    RunConfig c = asset(name);
    EXPECT_EQ(checkPlanProgress(planOf(c)), "") << name;
    c.forwardOnly = true;
    EXPECT_EQ(checkPlanProgress(planOf(c)), "") << name << " forward-only";
  }
}

TEST(Plan, PlantedDeadlockIsDiagnosed) {
  Plan p = planOf(testing::llmOnly(4, 8));
  // Rank 1 receives microbatch 1 before microbatch 0: rank 0 sends mb 0 first.
  auto& acts = p.ranks[1].actions;
  ASSERT_EQ(actionLabel(acts[0]), "RF");
  ASSERT_EQ(actionLabel(acts[3]), "RF");
  std::swap(acts[0], acts[3]);
  std::string d = checkPlanProgress(p);
  EXPECT_NE(d.find("rank 1 waits in RF mb 1 (seq 0) for rank 0"), std::string::npos) << d;
  EXPECT_NE(d.find("rank 0 waits in SF mb 0 (seq 1) for rank 1"), std::string::npos) << d;
  EXPECT_NE(d.find("cycle: 0 -> 1 -> 0"), std::string::npos) << d;
}

TEST(Plan, MissingPartnerIsDiagnosed) {
  Plan p = planOf(testing::llmOnly(2, 2));
  auto& acts = p.ranks[1].actions;
  ASSERT_EQ(actionLabel(acts[0]), "RF");
  acts.erase(acts.begin());
  std::string d = checkPlanProgress(p);
  EXPECT_NE(d.find("rank 0 in SF mb 0 (seq 1)"), std::string::npos) << d;
  EXPECT_NE(d.find("rank 1 has no matching action"), std::string::npos) << d;
}

TEST(Plan, BridgeLeadersCarryMessagesMembersDoNot) {
  Plan p = planOf(asset("default"));  // vision tp2 dp2 (0-3) -> llm tp2 pp2 (4-7), fan-in
  const Action& rf4 = p.ranks[4].actions[0];
  ASSERT_EQ(rf4.kind, ActionKind::RecvForward);
  ASSERT_EQ(rf4.messages.size(), 2u);
  EXPECT_EQ(rf4.messages[0].peer, 1);
  EXPECT_EQ(rf4.messages[1].peer, 3);
  EXPECT_EQ(rf4.messages[0].edge, "vision->llm");
  EXPECT_EQ(rf4.messages[0].edgeKind, events::EdgeKind::Bridge);
  EXPECT_EQ(rf4.messages[0].role, events::BridgeRole::FanIn);
  const Action& rf5 = p.ranks[5].actions[0];
  EXPECT_EQ(rf5.kind, ActionKind::RecvForward);  // every TP rank of the stage runs the loop
  EXPECT_TRUE(rf5.messages.empty());
  EXPECT_EQ(actionLabel(p.ranks[0].actions[1]), "SF");
  EXPECT_TRUE(p.ranks[0].actions[1].messages.empty());
  ASSERT_EQ(p.ranks[1].actions[1].messages.size(), 1u);
  EXPECT_EQ(p.ranks[1].actions[1].messages[0].peer, 4);
  // P2P inside the llm: same (tp, dp), pp + 1.
  const Action& sf4 = p.ranks[4].actions[2];
  ASSERT_EQ(sf4.kind, ActionKind::SendForward);
  ASSERT_EQ(sf4.messages.size(), 1u);
  EXPECT_EQ(sf4.messages[0].peer, 6);
  EXPECT_EQ(sf4.messages[0].edge, "llm:pp0->pp1");
  EXPECT_EQ(p.ranks[5].actions[2].messages[0].peer, 7);
  // Header facts.
  ASSERT_EQ(p.ranks[5].stages.size(), 1u);
  const RankStage& s5 = p.ranks[5].stages[0];
  EXPECT_EQ(s5.module, "llm");
  EXPECT_EQ((std::vector<int>{s5.tp, s5.pp, s5.dp}), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(p.ranks[5].globalStage, 1);
  EXPECT_EQ(p.ranks[2].stages.at(0).dp, 1);
}

TEST(Plan, FanOutRoles) {
  Plan p = planOf(asset("fan_out"));          // vision tp2 pp2 (0-3) -> llm dp4 (4-7)
  const Action& sf3 = p.ranks[3].actions[2];  // RF F0 SF
  ASSERT_EQ(sf3.kind, ActionKind::SendForward);
  ASSERT_EQ(sf3.messages.size(), 4u);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(sf3.messages[j].peer, 4 + j);
    EXPECT_EQ(sf3.messages[j].role, events::BridgeRole::FanOut);
  }
  EXPECT_TRUE(p.ranks[2].actions[2].messages.empty());
}

TEST(Plan, TwoEncodersFeedLlmFirstStageInConfigOrder) {
  Plan p = planOf(asset("two_encoders"));  // vision pp2 (0-1), audio (2) -> llm pp2 (3-4)
  EXPECT_EQ(p.totalStages, 4);
  EXPECT_EQ(p.ranks[2].globalStage, 1);  // audio right-aligned
  EXPECT_EQ(p.ranks[2].warmup, p.ranks[1].warmup);
  const Action& rf = p.ranks[3].actions[0];
  ASSERT_EQ(rf.kind, ActionKind::RecvForward);
  ASSERT_EQ(rf.messages.size(), 2u);
  EXPECT_EQ(rf.messages[0].edge, "vision->llm");
  EXPECT_EQ(rf.messages[0].peer, 1);
  EXPECT_EQ(rf.messages[1].edge, "audio->llm");
  EXPECT_EQ(rf.messages[1].peer, 2);
  for (const auto& a : p.ranks[3].actions) {
    if (a.kind == ActionKind::SendBackwardRecvForward) {
      ASSERT_EQ(a.messages.size(), 4u);
      EXPECT_EQ(a.messages[0].side, Side::Send);
      EXPECT_EQ(a.messages[1].side, Side::Send);
      EXPECT_EQ(a.messages[2].side, Side::Recv);
    }
  }
  EXPECT_EQ(checkPlanProgress(p), "");
}

TEST(Plan, UnequalEncoderDepthsRightAlignedAndProgress) {
  for (int m : {1, 2, 3, 8}) {
    RunConfig c = testing::makeConfig(moduleToml("vision", "encoder", 1, 3, 1, 0, 3) +
                                          moduleToml("audio", "encoder", 2, 1, 2, 3, 2) +
                                          moduleToml("llm", "llm", 1, 2, 2, 7, 2),
                                      m);
    Plan p = planOf(c);
    EXPECT_EQ(p.totalStages, 5);
    for (int r : {3, 4, 5, 6}) EXPECT_EQ(p.ranks[r].globalStage, 2);
    EXPECT_EQ(p.ranks[3].warmup, p.ranks[2].warmup);
    EXPECT_EQ(checkPlanProgress(p), "") << "m=" << m;
  }
}

TEST(Plan, ForwardOnly) {
  RunConfig c = testing::llmOnly(3, 3);
  c.forwardOnly = true;
  Plan p = planOf(c);
  EXPECT_TRUE(p.forwardOnly);
  EXPECT_EQ(orderString(p.ranks[0]), "F0 SF F1 SF F2 SF");
  EXPECT_EQ(orderString(p.ranks[1]), "RF F0 SF RF F1 SF RF F2 SF");
  EXPECT_EQ(orderString(p.ranks[2]), "RF F0 RF F1 RF F2");
  EXPECT_EQ(checkPlanProgress(p), "");
}

TEST(Plan, SingleStageHasNoComms) {
  Plan p = planOf(testing::llmOnly(1, 3));
  EXPECT_EQ(orderString(p.ranks[0]), "F0 B0 F1 B1 F2 B2 DP_REDUCE OPT_STEP");
}

TEST(Plan, ToRecords) {
  Plan p = planOf(asset("default"));
  auto recs = toRecords(p.ranks[4], 1);
  ASSERT_EQ(recs.size(), p.ranks[4].actions.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    EXPECT_EQ(recs[i].seq, static_cast<int>(i));
    EXPECT_EQ(recs[i].rank, 4);
    EXPECT_EQ(recs[i].iteration, 1);
    EXPECT_EQ(recs[i].module, "llm");
    EXPECT_EQ(recs[i].stage, 0);
  }
  EXPECT_EQ(recs[0].kind, ActionKind::RecvForward);
  EXPECT_EQ(recs[0].peers, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(recs.back().kind, ActionKind::OptimizerStep);
}

TEST(Plan, RenderShowsHeadersCellsCountsAndBubble) {
  RunConfig c = testing::llmOnly(4, 8);
  std::string text = renderPlan(planOf(c), c);
  for (const char* want : {"rank", "module", "tp/pp/dp", "stage", "SF_RB", "F7", "B0", "warmup",
                           "steady", "cooldown", "3/11", "0.273"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

}  // namespace
}  // namespace stagescope::plan
