// Colocated modules (several encoders on the same ranks; an encoder on the llm's first-stage
// ranks) against two independent computations of the same model and seeds: the single-process
// reference, and the same modules laid out without overlap ("twin").  Colocation changes where
// stages run and how activations cross (local hand-offs), never the maths: the loss within
// 1e-6 relative and every final gradient within 1e-5 relative of both, for both iterations.
// Each layout runs at micro_batch_size 1 and 2, except fan-in (encoder dp2 -> llm dp1 needs an
// even micro_batch_size: 2 and 4).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "storage/RunReader.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

struct Layout {
  std::string name;
  std::string config;                  // assets/configs/<config>.toml
  std::vector<std::string> colocated;  // --set overrides making the colocated layout
  std::vector<std::string> twin;       // --set overrides: the same modules without overlap
  int microBatchSize = 1;
  std::string localEdge;  // an edge that must hold local hand-offs ("" when none expected)
};

void PrintTo(const Layout& l, std::ostream* os) {
  *os << l.name;
}

model::RunModel runLayout(const Layout& l, const std::vector<std::string>& sets,
                          const std::string& tag, bool reference) {
  std::vector<std::string> args = {
      "--record", "full",
      "--set",    "optimizer.kind=\"sgd\"",
      "--set",    "optimizer.momentum=0.9",
      "--set",    "optimizer.lr=0.05",
      "--set",    "micro_batch_size=" + std::to_string(l.microBatchSize)};
  if (reference) args.push_back("--reference");
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  RunOutput out = runStagescope(assetConfig(l.config), args, tag);
  EXPECT_EQ(out.exitCode, 0) << out.output;
  model::RunModel run = storage::loadRun(out.runPath, {.payloads = true});
  EXPECT_EQ(run.info.status, events::RunStatus::Completed) << out.output;
  return run;
}

class Colocated : public ::testing::TestWithParam<Layout> {};

TEST_P(Colocated, SameMathsAsTheReferenceAndAsTheLayoutWithoutOverlap) {
  const Layout& l = GetParam();
  model::RunModel run = runLayout(l, l.colocated, "coloc-" + l.name, /*reference=*/true);
  // The layout really is colocated: some rank ran actions of two modules.
  std::set<std::pair<int, std::string>> stageOfAction;
  for (const auto& actions : run.actions) {
    for (const auto& a : actions) stageOfAction.insert({a.rank, a.module});
  }
  std::map<int, int> actionModules;
  for (const auto& [rank, module] : stageOfAction) actionModules[rank]++;
  bool colocatedActions = false;
  for (const auto& [rank, n] : actionModules) colocatedActions = colocatedActions || n > 1;
  EXPECT_TRUE(colocatedActions) << "no rank ran actions of two modules";
  if (!l.localEdge.empty()) {
    int local = 0;
    for (const auto& t : run.transfers) {
      if (t.edge == l.localEdge && t.srcRank == t.dstRank) ++local;
    }
    // Every microbatch crosses once each way per iteration, recorded on both sides.
    EXPECT_GT(local, 0) << "no local hand-off on " << l.localEdge;
    EXPECT_EQ(local % 4, 0) << "local hand-offs come as send/recv pairs in both directions";
  }
  expectSameMaths(run, run, /*reference=*/true, l.name + " vs reference");
  model::RunModel twin = runLayout(l, l.twin, "twin-" + l.name, /*reference=*/false);
  expectSameMaths(run, twin, /*reference=*/false, l.name + " vs layout without overlap");
}

std::vector<Layout> layouts() {
  std::vector<Layout> out;
  for (int mbs : {1, 2}) {
    const std::string m = "_mbs" + std::to_string(mbs);
    // (a) vision tp2 + audio tp2 both on ranks 0-1 -> llm pp2 on ranks 2-3.
    out.push_back({"two_encoders_tp2_same_ranks" + m,
                   "two_encoders",
                   {"modules.vision.pp=1", "modules.vision.tp=2", "modules.audio.tp=2",
                    "modules.audio.offset=0", "modules.llm.offset=2"},
                   {"modules.vision.pp=1", "modules.vision.tp=2", "modules.audio.tp=2",
                    "modules.audio.offset=2", "modules.llm.offset=4"},
                   mbs,
                   ""});
    // (b) vision tp2 on the ranks of llm stage 0 (llm tp2 pp2 on ranks 0-3).
    out.push_back({"encoder_tp2_on_llm_stage0" + m,
                   "default",
                   {"modules.vision.dp=1", "modules.llm.offset=0"},
                   {"modules.vision.dp=1", "modules.llm.offset=2"},
                   mbs,
                   "vision->llm"});
    // Unequal depth: vision pp2 on ranks 0-1, audio pp1 right-aligned on rank 1 (next to
    // vision's last stage) -> llm pp2 on ranks 2-3.
    out.push_back({"unequal_depth_pp2_pp1" + m,
                   "two_encoders",
                   {"modules.audio.offset=1", "modules.llm.offset=2"},
                   {},
                   mbs,
                   ""});
    // (a) + (b): both encoders and llm stage 0 on ranks 0-1 (assets/configs/colocated.toml).
    out.push_back({"two_encoders_on_llm_stage0" + m,
                   "colocated",
                   {},
                   {"modules.audio.offset=2", "modules.llm.offset=4"},
                   mbs,
                   "audio->llm"});
  }
  for (int mbs : {2, 4}) {
    const std::string m = "_mbs" + std::to_string(mbs);
    // Fan-in: vision dp2 and audio dp2 on ranks 0-1 -> llm dp1 pp2 on ranks 2-3.
    out.push_back({"fan_in_dp2_encoders_same_ranks" + m,
                   "two_encoders",
                   {"modules.vision.pp=1", "modules.vision.dp=2", "modules.audio.dp=2",
                    "modules.audio.offset=0", "modules.llm.offset=2"},
                   {"modules.vision.pp=1", "modules.vision.dp=2", "modules.audio.dp=2",
                    "modules.audio.offset=2", "modules.llm.offset=4"},
                   mbs,
                   ""});
    // Fan-in onto the llm's first stage: encoders dp2 on ranks 0-1 = llm tp2 stage 0; replica
    // 0 hands off locally on rank 0, replica 1 sends from rank 1.
    out.push_back(
        {"fan_in_dp2_encoders_on_llm_stage0" + m,
         "colocated",
         {"modules.vision.tp=1", "modules.vision.dp=2", "modules.audio.tp=1", "modules.audio.dp=2"},
         {"modules.vision.tp=1", "modules.vision.dp=2", "modules.audio.tp=1", "modules.audio.dp=2",
          "modules.audio.offset=2", "modules.llm.offset=4"},
         mbs,
         "vision->llm"});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, Colocated, ::testing::ValuesIn(layouts()),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace stagescope::testing
