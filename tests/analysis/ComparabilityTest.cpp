// Unrelated runs are refused, never compared (core/analysis/Comparability.h): two layouts of one
// model compare; a parameter of another full shape (another model) or another seed is named in
// one line, and compare's verdict is INCOMPLETE with no first divergence.
#include <gtest/gtest.h>

#include "core/analysis/Comparability.h"
#include "core/analysis/Compare.h"
#include "tests/support/SyntheticRun.h"

namespace stagescope::analysis {
namespace {

TEST(Comparability, TwoLayoutsOfOneModelMayBeCompared) {
  const model::RunModel a = testing::makeSyntheticRun(testing::defaultSyntheticSpec());
  const model::RunModel b = testing::makeSyntheticRun(testing::alternateLayoutSpec());
  EXPECT_EQ(whyNotComparable(a, b, "A", "B"), "");
}

TEST(Comparability, AParameterOfAnotherShapeIsAnotherModel) {
  const model::RunModel a = testing::makeSyntheticRun(testing::defaultSyntheticSpec());
  model::RunModel b = testing::makeSyntheticRun(testing::alternateLayoutSpec());
  ASSERT_FALSE(b.gradients.empty());
  const std::string param(b.gradients.front().param);
  const events::Shape wider{std::vector<int64_t>{7, 9}};
  for (auto& g : b.gradients)
    if (std::string(g.param) == param) g.fullShape = wider;
  const std::string why = whyNotComparable(a, b, "A", "B");
  EXPECT_EQ(why.rfind("not the same model: parameter " + param + " is ", 0), 0u) << why;
  EXPECT_NE(why.find(", [7, 9] in B"), std::string::npos) << why;

  CompareOptions opts;
  opts.labelA = "A";
  opts.labelB = "B";
  const Comparison c = compareRuns(a, b, opts);
  EXPECT_EQ(c.verdict, Verdict::Incomplete);
  EXPECT_EQ(c.refused, why);
  EXPECT_EQ(c.verdictReason, "cannot compare the runs: " + why);
  EXPECT_FALSE(c.first.has_value()) << "a first divergence named between two models";
}

}  // namespace
}  // namespace stagescope::analysis
