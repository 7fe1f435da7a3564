// engine::digest's statistics against ATen's own reductions in float64 (an independent
// implementation): finite tensors, tensors holding NaN, +Inf, -Inf and both infinities, in
// float32 and bfloat16.  A non-finite tensor must never show finite statistics.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "core/engine/TensorDigest.h"

namespace stagescope::engine {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Same value, or both NaN; finite values to a float64 summation's rounding.
void expectSame(double got, double want, const char* what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": " << got << ", expected NaN";
  } else if (std::isinf(want)) {
    EXPECT_EQ(got, want) << what;
  } else {
    EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, std::fabs(want))) << what;
  }
}

void expectStatsOf(const at::Tensor& t) {
  const TensorDigest d = digest(t);
  const at::Tensor x = t.to(at::kDouble);
  SCOPED_TRACE(::testing::Message() << "tensor " << t);
  EXPECT_EQ(d.stats.numel, t.numel());
  EXPECT_EQ(d.stats.nanCount, x.isnan().sum().item<int64_t>());
  EXPECT_EQ(d.stats.infCount, x.isinf().sum().item<int64_t>());
  expectSame(d.stats.min, x.min().item<double>(), "min");
  expectSame(d.stats.max, x.max().item<double>(), "max");
  expectSame(d.stats.mean, x.mean().item<double>(), "mean");
  expectSame(d.stats.l2, x.norm().item<double>(), "l2");
}

at::Tensor withValues(at::ScalarType dtype, std::initializer_list<std::pair<int64_t, double>> at) {
  at::Tensor base = at::linspace(-2.0, 3.0, 64, at::kDouble);
  for (const auto& [i, v] : at) base[i] = v;
  return base.to(dtype);
}

TEST(TensorDigest, StatisticsAreAtensOwnInEveryCase) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    expectStatsOf(withValues(dtype, {}));
    expectStatsOf(withValues(dtype, {{5, kNaN}}));
    expectStatsOf(withValues(dtype, {{7, kInf}}));
    expectStatsOf(withValues(dtype, {{7, -kInf}}));
    expectStatsOf(withValues(dtype, {{3, kInf}, {9, -kInf}}));
    expectStatsOf(withValues(dtype, {{3, kInf}, {9, kNaN}}));
    expectStatsOf(at::full({32}, kNaN, dtype));  // every element NaN: never an L2 of 0
  }
}

TEST(TensorDigest, AllNaNGradientShowsNaNNotZero) {
  const TensorDigest d = digest(at::full({4, 8}, kNaN, at::kFloat));
  EXPECT_EQ(d.stats.nanCount, 32);
  EXPECT_TRUE(std::isnan(d.stats.l2));
  EXPECT_TRUE(std::isnan(d.stats.mean));
}

}  // namespace
}  // namespace stagescope::engine
