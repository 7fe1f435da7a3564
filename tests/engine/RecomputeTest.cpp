// The run file is self-sufficient at level full: gather the initial parameter shards and
// the microbatch inputs from the file alone, recompute the step with the single-process
// reference, and match the gradients the ranks recorded after the DP reduction.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/engine/Reference.h"
#include "core/plan/Config.h"
#include "storage/RunReader.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

// Concatenates, in sample order, the inputs named `name` of `module` recorded for iteration
// 0 by the first-stage ranks with tp = 0 (replica dp holds a contiguous block per microbatch).
at::Tensor gatherInputs(const model::RunModel& run, const std::string& module,
                        const std::string& name, int microbatches) {
  std::map<std::pair<int, int>, at::Tensor> parts;  // (microbatch, dp) -> tensor
  for (const auto& in : run.inputs) {
    const auto* info = run.rankInfo(in.rank);
    if (in.iteration != 0 || in.module != module || in.name != name || !info || info->tp != 0)
      continue;
    auto dtype = in.dtype == "int64" ? at::kLong : at::kFloat;
    at::Tensor t = at::empty(in.shape, at::TensorOptions().dtype(dtype));
    std::memcpy(t.data_ptr(), in.payload.data(), in.payload.size());
    parts[{in.microbatch, info->dp}] = t;
  }
  std::vector<at::Tensor> ordered;
  for (int j = 0; j < microbatches; ++j) {
    for (auto& [key, t] : parts) {
      if (key.first == j) ordered.push_back(t);
    }
  }
  return at::cat(ordered, 0);
}

TEST(RunFile, FullLevelHoldsEnoughToRecomputeTheStep) {
  RunOutput out = runStagescope(assetConfig("fan_in"),
                                {"--record", "full", "--set", "iterations=1"}, "recompute");
  ASSERT_EQ(out.exitCode, 0) << out.output;
  model::RunModel run = storage::loadRun(out.runPath, {.payloads = true});
  plan::RunConfig cfg = plan::parseConfig(run.info.configText, "run file");

  std::map<std::string, at::Tensor> params;
  for (auto& [key, values] : gatherPhase(run, events::GradPhase::ParamInitial)) {
    params[key.second] = at::tensor(values);
  }
  ASSERT_GT(params.size(), 100u);
  engine::GlobalBatch batch;
  batch.tokens = gatherInputs(run, cfg.llm().name, "tokens", cfg.microbatches);
  for (const auto* enc : cfg.encoders()) {
    batch.patches[enc->name] = gatherInputs(run, enc->name, "patches", cfg.microbatches);
  }
  ASSERT_EQ(batch.tokens.size(0), cfg.globalBatch());

  engine::ReferenceIteration ref = engine::referenceStep(cfg, params, batch);
  ASSERT_EQ(params.size(), ref.gradients.size())
      << "every parameter's initial value came from the file";
  auto recorded = gatherReduced(run);
  ASSERT_EQ(recorded.size(), ref.gradients.size());
  for (const auto& [name, grad] : ref.gradients) {
    at::Tensor g = grad.contiguous();
    std::vector<float> want(g.data_ptr<float>(), g.data_ptr<float>() + g.numel());
    const auto& got = recorded.at({0, name});
    if (l2norm(want) < 1e-6) {  // analytically zero (attention key bias): rounding noise
      EXPECT_LE(l2norm(got), 1e-5) << name;
    } else {
      EXPECT_LE(relativeError(got, want), 1e-5) << name;
    }
  }
  auto losses = iterationLosses(run, false);
  EXPECT_NEAR(losses.at(0), ref.loss, 1e-6 * ref.loss);
}

}  // namespace
}  // namespace stagescope::testing
