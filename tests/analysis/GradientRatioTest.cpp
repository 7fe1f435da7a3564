// analysis::uniformGradientRatios (GradientRatio.h): a module whose gradients are all one factor
// off is named with that factor, and as §7.1 exactly when the factor is the quotient of the two
// layouts' d_L/d_E; a module with one parameter off by another factor, or with no factor, is not.
#include <gtest/gtest.h>

#include <string>

#include "core/analysis/GradientRatio.h"
#include "core/events/CapturedLayout.h"

namespace stagescope::analysis {
namespace {

GradRow row(const std::string& param, double a, double b, int iteration = 0) {
  GradRow r;
  r.param = param;
  r.iteration = iteration;
  r.hasA = r.hasB = true;
  r.normA = a;
  r.normB = b;
  return r;
}

// A captured run that declared vision (dp `encoderDp`) feeding llm (dp `llmDp`).
model::RunModel declared(int encoderDp, int llmDp) {
  model::RunModel run;
  run.info.configText = std::string(events::kCapturedConfigLine) +
                        "\nmicrobatches = 4\nmicro_batch_size = 4\n[[modules]]\nname = \"vision\"\n"
                        "kind = \"encoder\"\ndp = " +
                        std::to_string(encoderDp) +
                        "\noffset = 0\nlayers = 1\n[[modules]]\nname = " +
                        "\"llm\"\nkind = \"llm\"\ndp = " + std::to_string(llmDp) +
                        "\noffset = " + std::to_string(encoderDp) + "\nlayers = 1\n";
  run.info.origin = events::RunOrigin::Captured;
  return run;
}

TEST(GradientRatio, AUniformFactorIsNamedAndMatchedToSection71) {
  const std::vector<GradRow> rows = {row("vision.w", 0.5, 1.0), row("vision.b", 0.25, 0.5),
                                     row("llm.w", 3.0, 3.0), row("llm.b", 2.0, 2.0)};
  const auto found = uniformGradientRatios(rows, declared(2, 1), declared(1, 1));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].module, "vision");
  EXPECT_DOUBLE_EQ(found[0].ratio, 0.5);
  EXPECT_EQ(found[0].parameters, 2);
  EXPECT_DOUBLE_EQ(found[0].expected, 0.5);
  EXPECT_NE(found[0].sentence.find("d_L/d_E: 1/2 in A's layout, 1 in B's (§7.1"), std::string::npos)
      << found[0].sentence;
  // fan-out (1 -> 2) against one replica: 2
  const auto out = uniformGradientRatios({row("vision.w", 2.0, 1.0), row("vision.b", 1.0, 0.5)},
                                         declared(1, 2), declared(1, 1));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].sentence.find("d_L/d_E: 2 in A's layout, 1 in B's (§7.1"), std::string::npos);
}

TEST(GradientRatio, AFactorThatARecordedNormalisationMismatchExplainsIsNotCalledSection71) {
  // A: vision records a mean loss, llm a per-token one (Megatron-Bridge PR #5555): its 0.5 is
  // d_L/d_E here as well, and no longer named §7.1 (issue 38: it was misnamed).
  auto a = declared(2, 1);
  events::ModuleStepRecord vision, llm;
  vision.module = "vision";
  vision.normalisation = events::LossNormalisation::Mean;
  llm.module = "llm";
  llm.normalisation = events::LossNormalisation::PerToken;
  a.moduleSteps = {llm, vision};
  const auto found = uniformGradientRatios({row("vision.w", 0.5, 1.0), row("vision.b", 0.25, 0.5)},
                                           a, declared(1, 1));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].sentence.find("(§7.1"), std::string::npos) << found[0].sentence;
  EXPECT_NE(found[0].sentence.find("the modules normalise the loss differently in A (vision mean, "
                                   "llm per_token)"),
            std::string::npos)
      << found[0].sentence;
}

TEST(GradientRatio, AFactorOtherThanTheLayoutsIsAScaleErrorOfItsOwn) {
  const auto found = uniformGradientRatios({row("vision.w", 3.0, 1.0), row("vision.b", 1.5, 0.5)},
                                           declared(2, 1), declared(1, 1));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].sentence.find("§7.1"), std::string::npos) << found[0].sentence;
  EXPECT_NE(found[0].sentence.find("not the layouts' data-parallel factor (1/2)"),
            std::string::npos)
      << found[0].sentence;
}

TEST(GradientRatio, NonUniformOrUnitRatiosAreNotNamed) {
  // one parameter off by 2, the other by 2.01: not one factor
  EXPECT_TRUE(uniformGradientRatios({row("vision.w", 2.0, 1.0), row("vision.b", 2.01, 1.0)},
                                    declared(1, 1), declared(1, 1))
                  .empty());
  // equal gradients: no ratio; a side missing or zero: not judged
  GradRow onlyA = row("vision.w", 1.0, 0.0);
  onlyA.hasB = false;
  EXPECT_TRUE(uniformGradientRatios({row("vision.w", 1.0, 1.0), onlyA, row("llm.w", 1.0, 0.0)},
                                    declared(1, 1), declared(1, 1))
                  .empty());
  // each iteration on its own
  const auto found =
      uniformGradientRatios({row("vision.w", 2.0, 1.0, 0), row("vision.w", 3.0, 1.0, 1)},
                            model::RunModel{}, model::RunModel{});
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].expected, -1);  // no layout known: the ratio alone
}

}  // namespace
}  // namespace stagescope::analysis
