// Colocated modules in the plan: which layouts parse (and which are refused, with the rank,
// the stages and why), each stage's position in the combined pipeline, the one 1F1B order of
// a rank holding several stages, local hand-offs, and the progress proof over them.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/plan/Colocation.h"
#include "core/plan/Plan.h"
#include "tests/plan/PlanTestUtil.h"

namespace stagescope::plan {
namespace {

using events::ActionKind;
using testing::makeConfig;
using testing::moduleToml;

std::string modules(const std::string& enc1, const std::string& enc2, const std::string& llm) {
  return enc1 + enc2 + llm;
}

std::string refusal(const std::string& text) {
  try {
    makeConfig(text, 4);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Labels "module:F0" of a rank's actions, space separated.
std::string moduleOrder(const RankPlan& r) {
  std::string out;
  for (const Action& a : r.actions) {
    out += (out.empty() ? "" : " ") + a.module + ":" + actionLabel(a) + (a.internal ? "*" : "");
  }
  return out;
}

TEST(Colocation, TwoEncodersOnTheSameRanksShareOnePosition) {
  // vision tp2 and audio tp2 on ranks 0-1 -> llm pp2 on ranks 2-3.
  RunConfig c = makeConfig(modules(moduleToml("vision", "encoder", 2, 1, 1, 0, 2),
                                   moduleToml("audio", "encoder", 2, 1, 1, 0, 2),
                                   moduleToml("llm", "llm", 1, 2, 1, 2, 2)),
                           4);
  Topology topo(c);
  EXPECT_TRUE(topo.colocation().any());
  EXPECT_EQ(topo.totalStages(), 3);
  EXPECT_EQ(topo.globalStage("vision", 0), 0);
  EXPECT_EQ(topo.globalStage("audio", 0), 0);
  Plan p = makePlan(c, topo);
  ASSERT_EQ(p.ranks[0].stages.size(), 2u);
  EXPECT_EQ(p.ranks[0].modules(), "vision+audio");
  EXPECT_EQ(p.ranks[0].warmup, 2);  // min(3 - 0 - 1, 4), from the combined stage graph
  EXPECT_EQ(p.ranks[2].warmup, 1);
  EXPECT_EQ(p.ranks[3].warmup, 0);
  // Forwards of both encoders, then one send per bridge; backward in reverse module order.
  EXPECT_EQ(moduleOrder(p.ranks[0]).substr(0, 55),
            "vision:F0 audio:F0 vision:SF audio:SF vision:F1 audio:F");
  // Both bridges' leader is rank 1 (tp = T-1): the llm's stage takes them in one action each,
  // so no action has two messages with one peer.
  for (const Action& a : p.ranks[2].actions) {
    if (a.kind != ActionKind::RecvForward && a.kind != ActionKind::SendBackwardRecvForward)
      continue;
    std::set<std::pair<int, int>> peers;
    for (const Message& m : a.messages) {
      EXPECT_TRUE(peers.insert({m.peer, static_cast<int>(m.side)}).second)
          << "two messages with rank " << m.peer << " in one action";
    }
  }
  EXPECT_TRUE(checkPlanProgress(p).empty()) << checkPlanProgress(p);
}

TEST(Colocation, EncoderOnTheLlmFirstStageHandsOffLocally) {
  // assets/configs/colocated.toml: vision tp2 + audio tp2 + llm stage 0 (tp2) on ranks 0-1.
  RunConfig c = loadConfig(std::string(STAGESCOPE_CONFIG_DIR) + "/colocated.toml");
  Topology topo(c);
  EXPECT_EQ(topo.totalStages(), 2);  // the encoders share the llm's first position
  EXPECT_EQ(topo.globalStage("vision", 0), 0);
  EXPECT_EQ(topo.globalStage("llm", 0), 0);
  EXPECT_EQ(topo.globalStage("llm", 1), 1);
  const Bridge& b = topo.bridges()[0];
  EXPECT_TRUE(b.colocated);
  EXPECT_EQ(b.srcLeaders, (std::vector<int>{0}));  // chosen = the dest leader: local
  EXPECT_EQ(b.destLeaders, (std::vector<int>{0}));
  EXPECT_EQ(b.leaders(), (std::vector<int>{0}));
  Plan p = makePlan(c, topo);
  const RankPlan& r0 = p.ranks[0];
  EXPECT_EQ(r0.modules(), "vision+audio+llm");
  EXPECT_EQ(r0.warmup, 1);
  EXPECT_EQ(p.ranks[2].warmup, 0);
  // One 1F1B order per microbatch: encoders' forwards, hand-offs pair by pair (* = internal),
  // the llm stage's forward and its send; backward in reverse, hand-offs back pair by pair.
  const std::string order = moduleOrder(r0);
  EXPECT_EQ(order.substr(0, order.find(" vision:F1")),
            "vision:F0 audio:F0 vision:SF* llm:RF* audio:SF* llm:RF* llm:F0 llm:SF");
  const size_t b0 = order.find("llm:B0");
  ASSERT_NE(b0, std::string::npos);
  EXPECT_EQ(order.substr(b0, order.find(" vision:F2") - b0),
            "llm:B0 llm:SB* vision:RB* llm:SB* audio:RB* audio:B0 vision:B0");
  // The hand-off: a message to this rank itself on the bridge's edge, both ways.
  const Action& sf = r0.actions[2];
  ASSERT_EQ(sf.messages.size(), 1u);
  EXPECT_EQ(sf.messages[0].peer, 0);
  EXPECT_EQ(sf.messages[0].edge, "vision->llm");
  const Action& rf = r0.actions[3];
  ASSERT_EQ(rf.messages.size(), 1u);
  EXPECT_EQ(rf.messages[0].peer, 0);
  EXPECT_EQ(rf.messages[0].side, events::Side::Recv);
  ASSERT_EQ(rf.broadcasts.size(), 1u);  // then the leader broadcasts to its TP peer
  EXPECT_EQ(rf.broadcasts[0].ranks, (std::vector<int>{0, 1}));
  // Every module's DP reduction and step.
  const std::string tail =
      "vision:DP_REDUCE audio:DP_REDUCE llm:DP_REDUCE vision:OPT_STEP audio:OPT_STEP llm:OPT_STEP";
  EXPECT_EQ(order.substr(order.size() - tail.size()), tail);
  EXPECT_TRUE(checkPlanProgress(p).empty()) << checkPlanProgress(p);
}

TEST(Colocation, AReceivePlannedBeforeItsOwnSendIsADeadlock) {
  RunConfig c = loadConfig(std::string(STAGESCOPE_CONFIG_DIR) + "/colocated.toml");
  Plan p = makePlan(c, Topology(c));
  auto& actions = p.ranks[0].actions;
  std::swap(actions[2], actions[3]);  // llm:RF* (takes the hand-off) before vision:SF* (posts it)
  PlanProgress progress = analyzePlanProgress(p);
  EXPECT_FALSE(progress.ok);
  EXPECT_NE(progress.text.find("rank 0 waits in RF mb 0 (seq 2) for rank 0"), std::string::npos)
      << progress.text;
}

TEST(Colocation, UnequalDepthsRightAlignedOnTheLastStage) {
  // vision pp2 on ranks 0-1, audio pp1 on rank 1 (next to vision's last stage) -> llm pp2.
  RunConfig c = makeConfig(modules(moduleToml("vision", "encoder", 1, 2, 1, 0, 2),
                                   moduleToml("audio", "encoder", 1, 1, 1, 1, 2),
                                   moduleToml("llm", "llm", 1, 2, 1, 2, 2)),
                           4);
  Plan p = makePlan(c, Topology(c));
  EXPECT_EQ(p.totalStages, 4);
  EXPECT_EQ(p.ranks[1].modules(), "vision+audio");
  EXPECT_EQ(p.ranks[1].globalStage, 1);
  EXPECT_EQ(p.ranks[1].warmup, 2);
  EXPECT_EQ(p.ranks[0].warmup, 3);
  EXPECT_EQ(moduleOrder(p.ranks[1]).substr(0, 38), "vision:RF vision:F0 audio:F0 vision:SF");
  EXPECT_TRUE(checkPlanProgress(p).empty()) << checkPlanProgress(p);
}

TEST(Colocation, ShortEncoderOnTheFirstRankSitsAtTheFront) {
  // audio pp1 on rank 0 beside vision stage 0 (vision pp2): one slot, position 0, so audio's
  // edge to the llm skips two positions; the progress proof still holds.
  RunConfig c = makeConfig(modules(moduleToml("vision", "encoder", 1, 2, 1, 0, 2),
                                   moduleToml("audio", "encoder", 1, 1, 1, 0, 2),
                                   moduleToml("llm", "llm", 1, 2, 1, 2, 2)),
                           4);
  Plan p = makePlan(c, Topology(c));
  EXPECT_EQ(p.ranks[0].modules(), "vision+audio");
  EXPECT_EQ(p.ranks[0].warmup, 3);
  EXPECT_EQ(p.ranks[2].warmup, 1);
  EXPECT_TRUE(checkPlanProgress(p).empty()) << checkPlanProgress(p);
}

TEST(Colocation, RefusalsNameTheRankTheStagesAndWhy) {
  // Partial overlap: vision on rank 0 only, llm stage 0 on ranks 0-1.
  EXPECT_NE(refusal(modules(moduleToml("vision", "encoder", 1, 1, 1, 0, 2), "",
                            moduleToml("llm", "llm", 2, 1, 1, 0, 2)))
                .find("grid of \"llm\" overlaps grid of \"vision\" at rank 0, but \"vision\" "
                      "stage 0 holds ranks 0 and \"llm\" stage 0 holds ranks 0..1"),
            std::string::npos);
  // An encoder on the llm's last stage.
  EXPECT_NE(refusal(modules(moduleToml("vision", "encoder", 1, 1, 1, 1, 2), "",
                            moduleToml("llm", "llm", 1, 2, 1, 0, 2)))
                .find("rank 1 holds \"vision\" stage 0 and \"llm\" stage 1, but the path"),
            std::string::npos);
  // A module chain through another rank and back: vision pp2 and llm pp2 on the same ranks.
  const std::string chain = refusal(modules(moduleToml("vision", "encoder", 1, 2, 1, 0, 2), "",
                                            moduleToml("llm", "llm", 1, 2, 1, 0, 2)));
  EXPECT_NE(chain.find("rank 0 holds \"vision\" stage 0 and \"llm\" stage 0"), std::string::npos)
      << chain;
  EXPECT_NE(chain.find("leaves these ranks and comes back"), std::string::npos) << chain;
  EXPECT_EQ(chain.find('\n'), std::string::npos) << "one line";
  // Allowed: an encoder on the llm's first stage.
  EXPECT_EQ(refusal(modules(moduleToml("vision", "encoder", 1, 1, 1, 0, 2), "",
                            moduleToml("llm", "llm", 1, 2, 1, 0, 2))),
            "");
}

TEST(Colocation, WithoutOverlapNothingChanges) {
  for (const char* name : {"default", "two_encoders", "fan_in", "fan_out", "llm_first"}) {
    RunConfig c = loadConfig(std::string(STAGESCOPE_CONFIG_DIR) + "/" + name + ".toml");
    Topology topo(c);
    EXPECT_FALSE(topo.colocation().any()) << name;
    for (const Bridge& b : topo.bridges()) EXPECT_FALSE(b.colocated) << name;
    Plan p = makePlan(c, topo);
    for (const RankPlan& r : p.ranks) {
      EXPECT_EQ(r.stages.size(), 1u) << name;
      for (const Action& a : r.actions) EXPECT_FALSE(a.internal) << name;
    }
  }
}

}  // namespace
}  // namespace stagescope::plan
