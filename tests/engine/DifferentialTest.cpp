// The pipelined multi-process run against the independent single-process reference, over
// the layouts the engine issue lists: loss within 1e-6 relative and every parameter's
// final (DP-reduced, TP-gathered) gradient within ||g - g_ref|| / ||g_ref|| <= 1e-5, for
// both iterations (so the optimizer step is checked too).
#include <gtest/gtest.h>

#include <cmath>

#include "storage/RunReader.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

struct Layout {
  std::string name;    // test name
  std::string config;  // assets/configs/<config>.toml
  std::vector<std::string> sets;
};

void PrintTo(const Layout& l, std::ostream* os) {
  *os << l.name;
}

class Differential : public ::testing::TestWithParam<Layout> {};

TEST_P(Differential, LossAndEveryGradientMatchTheSingleProcessReference) {
  const Layout& layout = GetParam();
  // SGD with momentum unless the layout says otherwise: its step is linear in the gradient,
  // so iteration 2 checks the step without Adam's sign-like first step amplifying the
  // float32 rounding noise of near-zero gradient elements (the Adam layouts below still hold
  // 1e-5 on this model; other layouts reach 2e-5 in iteration 2 for that reason).
  std::vector<std::string> args = {"--record",
                                   "full",
                                   "--reference",
                                   "--set",
                                   "optimizer.kind=\"sgd\"",
                                   "--set",
                                   "optimizer.momentum=0.9",
                                   "--set",
                                   "optimizer.lr=0.05"};
  for (const auto& s : layout.sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  RunOutput out = runStagescope(assetConfig(layout.config), args, "diff-" + layout.name);
  ASSERT_EQ(out.exitCode, 0) << out.output;
  model::RunModel run = storage::loadRun(out.runPath, {.payloads = true});
  ASSERT_EQ(run.info.status, events::RunStatus::Completed);

  const bool forwardOnly = run.info.configText.find("forward_only = true") != std::string::npos;
  if (forwardOnly) {
    auto losses = iterationLosses(run, false), refLosses = iterationLosses(run, true);
    ASSERT_EQ(losses.size(), static_cast<size_t>(run.info.iterations));
    for (const auto& [it, loss] : losses) {
      EXPECT_NEAR(loss, refLosses[it], 1e-6 * std::abs(refLosses[it])) << "iteration " << it;
    }
    EXPECT_TRUE(gatherReduced(run).empty());
    return;
  }
  expectSameMaths(run, run, /*reference=*/true, layout.name);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Differential,
    ::testing::Values(
        Layout{"enc1_llm1", "single", {}},
        Layout{"enc_tp2pp2_llm_tp2pp2",
               "default",
               {"modules.vision.pp=2", "modules.vision.dp=1", "modules.vision.layers=2"}},
        Layout{"two_encoders_unequal_depth_llm_pp2", "two_encoders", {}},
        Layout{"fan_in_dp4_to_tp2pp2", "fan_in", {}},
        Layout{"fan_out_tp2pp2_to_dp4", "fan_out", {}},
        Layout{"enc_tp2dp2_llm_tp4", "default", {"modules.llm.tp=4", "modules.llm.pp=1"}},
        Layout{"llm_alone_pp4", "llm_pp4", {}}, Layout{"m1", "default", {"microbatches=1"}},
        Layout{"m_below_stages", "default", {"microbatches=2"}},
        Layout{"llm_at_offset0", "llm_first", {}},
        Layout{"adam_default", "default", {"optimizer.kind=\"adam\"", "optimizer.lr=0.001"}},
        Layout{"adam_loss_scale",
               "default",
               {"optimizer.kind=\"adam\"", "optimizer.lr=0.001", "loss_scale=1024.0"}},
        Layout{"forward_only", "default", {"forward_only=true"}}),
    [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

}  // namespace
}  // namespace stagescope::testing
