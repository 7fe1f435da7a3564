// The plan drives the wire (engine-trust issue, item 5): the Communicator posts exactly the
// messages of the plan's actions.  Each test builds a real plan, optionally mutates one
// message, asks the static checker (plan::analyzePlanProgress) what will happen, then runs
// every rank's communication actions of the mutated plan through the real Communicator over
// real forked Gloo groups, and asserts that the engine does exactly what the checker
// predicted: the unmutated plan completes; a dropped or moved message leaves exactly the
// predicted ranks blocked in the predicted action, waiting on the predicted peer for the
// predicted message (the timeout diagnosis of each rank).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/engine/Communicator.h"
#include "core/engine/ProcessGroups.h"
#include "core/events/Recorder.h"
#include "core/plan/Config.h"
#include "core/plan/Plan.h"
#include "core/plan/Topology.h"
#include "tests/engine/MultiProcess.h"

namespace stagescope {
namespace {

using events::ActionKind;
using testing::Report;

// Short enough to keep the blocked runs brief, long enough for a busy machine to complete
// every wait the plan allows (no assertion depends on how long anything takes).
constexpr auto kTimeout = std::chrono::milliseconds(8000);

class NullRecorder final : public events::Recorder {
 public:
  events::RecordLevel level() const override { return events::RecordLevel::Stats; }
  void run(events::RunInfo) override {}
  void rank(events::RankInfo) override {}
  void planned(events::ActionRecord) override {}
  void action(events::ActionRecord) override {}
  void transfer(events::TransferRecord) override {}
  void gradient(events::GradientRecord) override {}
  void loss(events::LossRecord) override {}
  void input(events::InputRecord) override {}
  void diagnosis(events::DiagnosisRecord) override {}
  void wait(events::WaitRecord) override {}
  void referenceLoss(events::LossRecord) override {}
  void referenceGradient(events::GradientRecord) override {}
  void flush() override {}
  void close() override {}
};

using Mutation = std::function<void(plan::Plan&)>;

bool communicates(ActionKind k) {
  return k != ActionKind::Forward && k != ActionKind::Backward && k != ActionKind::DpReduce &&
         k != ActionKind::OptimizerStep;
}

// The whole tensor a rank sends in `a` (its parts are what the plan's messages carry): the
// first send's sequence and width, this module's batch (plan::stageShape).
at::Tensor sentTensor(const plan::RunConfig& cfg, const plan::RankPlan& /*me*/,
                      const plan::Action& a, events::Direction direction) {
  for (const auto& m : a.messages) {
    if (m.side != events::Side::Send || m.direction != direction) continue;
    const int64_t batch = plan::stageShape(cfg, cfg.module(a.module))[1];
    return at::ones({m.shape[0], batch, m.shape[2]});
  }
  return at::Tensor();
}

// One rank: every communication action of its (mutated) plan, in order, with stand-in
// tensors of the plan's shapes.  Reports "done", or where it gave up: "blocked <seq> <peer>
// <direction> <microbatch>" from its timeout.
std::string wireBody(const std::string& toml, const Mutation& mutate, int rank, int world,
                     int port) {
  const plan::RunConfig cfg = plan::parseConfig(toml, "plan_wire_test.toml");
  const plan::Topology topo(cfg);
  plan::Plan p = plan::makePlan(cfg, topo);
  if (mutate) mutate(p);
  auto store = engine::connectStore("127.0.0.1", port, /*isServer=*/false, world, kTimeout);
  engine::ProcessGroups groups(store, rank, world, engine::BackendKind::Gloo, kTimeout);
  engine::Communicator::createAllGroups(cfg, topo, groups);
  NullRecorder rec;
  engine::WaitState wait;
  const plan::RankPlan& me = p.ranks.at(rank);
  engine::Communicator comm(me, groups, rec, at::Device(at::kCPU), &wait);
  Report r;
  int seq = 0;
  try {
    for (; seq < static_cast<int>(me.actions.size()); ++seq) {
      const plan::Action& a = me.actions[seq];
      if (!communicates(a.kind)) continue;
      std::map<std::string, at::Tensor> inputs;
      at::Tensor grad;
      const at::Tensor act = sentTensor(cfg, me, a, events::Direction::Activation);
      std::map<std::string, at::Tensor> grads;
      const at::Tensor g = sentTensor(cfg, me, a, events::Direction::Gradient);
      for (const auto& m : cfg.modules) grads[m.name] = g;
      comm.run({0, seq, &a}, &act, &grads, &inputs, &grad);
    }
    comm.finishSends();
    r.put("result", std::vector<std::string>{"done"});
  } catch (const engine::CommTimeout& e) {
    r.put("result", std::vector<std::string>{"blocked"});
    r.put("blocked",
          std::vector<int64_t>{seq, e.peer(), wait.direction.load(), wait.microbatch.load()});
  }
  return r.text();
}

std::string toml(const std::string& modules) {
  return "seed = 1\niterations = 1\nmicrobatches = 2\nmicro_batch_size = 4\ndevice = \"cpu\"\n"
         "backend = \"gloo\"\ntimeout_seconds = 8\n\n[record]\nlevel = \"stats\"\n\n" +
         modules;
}

std::string module(const std::string& name, const std::string& kind, int pp, int dp, int offset) {
  return "[[modules]]\nname = \"" + name + "\"\nkind = \"" + kind +
         "\"\ntp = 1\ncp = 1\npp = " + std::to_string(pp) + "\ndp = " + std::to_string(dp) +
         "\noffset = " + std::to_string(offset) + "\nlayers = 2\n\n";
}

// llm alone, pp 2 (ranks 0, 1).
const std::string kPipeline = toml(module("llm", "llm", 2, 1, 0));
// Fan-in: encoder dp 2 (ranks 0, 1) -> llm pp 2 (ranks 2, 3).
const std::string kFanIn = toml(module("enc", "encoder", 1, 2, 0) + module("llm", "llm", 2, 1, 2));

// Runs the (mutated) plan on every rank and checks the engine against the checker.
void expectEngineDoesWhatTheCheckerPredicts(const std::string& config, const Mutation& mutate,
                                            bool expectOk) {
  const plan::RunConfig cfg = plan::parseConfig(config, "plan_wire_test.toml");
  plan::Plan p = plan::makePlan(cfg, plan::Topology(cfg));
  if (mutate) mutate(p);
  const plan::PlanProgress predicted = plan::analyzePlanProgress(p);
  ASSERT_EQ(predicted.ok, expectOk) << predicted.text;
  SCOPED_TRACE("checker: " + (predicted.ok ? std::string("ok") : predicted.text));

  auto outs = testing::runRanks(cfg.worldSize, [&](int rank, int world, int port) {
    return wireBody(config, mutate, rank, world, port);
  });
  std::map<int, std::map<std::string, std::vector<std::string>>> rep;
  for (const auto& o : outs) {
    ASSERT_EQ(o.exitCode, 0) << "rank " << o.rank << ": " << o.report;
    rep[o.rank] = Report::parse(o.report);
  }
  if (predicted.ok) {
    for (const auto& [rank, r] : rep) {
      EXPECT_EQ(r.at("result"), std::vector<std::string>{"done"}) << "rank " << rank;
    }
    return;
  }
  ASSERT_FALSE(predicted.blocked.empty());
  for (const auto& b : predicted.blocked) {
    SCOPED_TRACE("rank " + std::to_string(b.rank));
    const auto& r = rep.at(b.rank);
    ASSERT_EQ(r.at("result"), std::vector<std::string>{"blocked"});
    const auto got = testing::toInts(r.at("blocked"));
    EXPECT_EQ(got,
              (std::vector<int64_t>{b.actionSeq, b.waitsOn, static_cast<int>(b.message.direction),
                                    b.message.microbatch}))
        << "engine: blocked in action " << got[0] << " on rank " << got[1] << " (direction "
        << got[2] << ", microbatch " << got[3] << ")";
  }
}

// Index of rank `rank`'s first action of `kind` (with activation microbatch `mb`).
int findAction(const plan::Plan& p, int rank, ActionKind kind, int mb) {
  const auto& actions = p.ranks.at(rank).actions;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (actions[i].kind == kind && actions[i].microbatch == mb) return static_cast<int>(i);
  }
  throw std::runtime_error("no such action in the plan");
}

TEST(PlanDrivesTheWire, UnmutatedPlansCompleteAsTheCheckerProves) {
  expectEngineDoesWhatTheCheckerPredicts(kPipeline, nullptr, true);
  expectEngineDoesWhatTheCheckerPredicts(kFanIn, nullptr, true);
}

// Drop one message: encoder replica 1's leader (rank 1) no longer sends the activation of
// microbatch 0 to the llm (rank 2).  The checker names rank 2 in RF waiting on rank 1; the
// engine's rank 2 times out there, on exactly that message.
TEST(PlanDrivesTheWire, ADroppedMessageBlocksItsReceiverWhereTheCheckerSays) {
  Mutation drop = [](plan::Plan& p) {
    auto& msgs = p.ranks[1].actions[findAction(p, 1, ActionKind::SendForward, 0)].messages;
    ASSERT_EQ(msgs.size(), 1u);
    msgs.clear();
  };
  expectEngineDoesWhatTheCheckerPredicts(kFanIn, drop, false);
}

// Reorder: rank 0 posts the activation of microbatch 0 only in its last communication action
// (instead of SF mb 0).  Rank 1 then waits for it in RF mb 0 while rank 0 waits for the
// gradient of microbatch 0, which rank 1 sends only later: the checker names the cycle, the
// engine hangs in exactly those two waits.
TEST(PlanDrivesTheWire, AMovedMessageDeadlocksExactlyAsTheCheckerPredicts) {
  Mutation move = [](plan::Plan& p) {
    auto& actions = p.ranks[0].actions;
    auto& from = actions[findAction(p, 0, ActionKind::SendForward, 0)].messages;
    int last = -1;
    for (size_t i = 0; i < actions.size(); ++i) {
      if (!actions[i].messages.empty()) last = static_cast<int>(i);
    }
    ASSERT_EQ(from.size(), 1u);
    auto& to = actions[last].messages;
    to.insert(to.begin(), from.front());  // sends before receives within an action
    from.clear();
  };
  expectEngineDoesWhatTheCheckerPredicts(kPipeline, move, false);
}

}  // namespace
}  // namespace stagescope
