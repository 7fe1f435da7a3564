// core/analysis/Samples.h regenerates the engine's samples without LibTorch; these tests hold
// the port to the engine's draws (core/engine/Init.cpp) over many keys and shapes, so a change
// of either (or of LibTorch's generator) fails here before check calls correct inputs wrong.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>

#include "core/analysis/Samples.h"
#include "core/engine/Init.h"

using namespace stagescope;

TEST(SampleData, TokensAreTheEnginesBitwise) {
  for (uint64_t seed : {1234ull, 7ull, 20261202ull})
    for (int it = 0; it < 3; ++it)
      for (int64_t s = 0; s < 40; ++s)
        for (auto [len, vocab] : {std::pair{8, 32}, {8, 64}, {3, 2}, {16, 1000}}) {
          const at::Tensor t = engine::sampleTokens(seed, it, s, len, vocab);
          const auto port = analysis::regenerateTokens(seed, it, s, len, vocab);
          ASSERT_EQ(static_cast<int64_t>(port.size()), t.numel());
          const int64_t* p = t.data_ptr<int64_t>();
          for (size_t i = 0; i < port.size(); ++i)
            ASSERT_EQ(port[i], p[i]) << "seed " << seed << " it " << it << " sample " << s;
        }
}

TEST(SampleData, PatchesAreTheEnginesWithinTheElementTolerance) {
  double worst = 0;
  size_t values = 0, bitwise = 0;
  for (uint64_t seed : {1234ull, 7ull, 20261202ull})
    for (int it = 0; it < 3; ++it)
      for (int64_t s = 0; s < 40; ++s)
        for (auto [patches, dim] : {std::pair{4, 8}, {2, 8}, {3, 7}, {16, 24}, {1, 17}}) {
          const at::Tensor t = engine::samplePatches(seed, it, s, "vision", patches, dim);
          const auto port = analysis::regeneratePatches(seed, it, s, "vision", patches, dim);
          ASSERT_TRUE(port.has_value());
          ASSERT_EQ(static_cast<int64_t>(port->size()), t.numel());
          const float* p = t.data_ptr<float>();
          for (size_t i = 0; i < port->size(); ++i) {
            const double d =
                std::fabs(double{(*port)[i]} - p[i]) / std::max(1.0, double{std::fabs(p[i])});
            worst = std::max(worst, d);
            bitwise += (*port)[i] == p[i];
            ++values;
          }
        }
  std::printf("patches: %zu values, %zu bitwise, worst relative difference %.3g\n", values, bitwise,
              worst);
  // Measured: 169,200 values, 62 % bitwise, worst 2.0e-6 (a few float32 ulps of log/sin/cos).
  EXPECT_LE(worst, analysis::kPatchElementTolerance);
  // Another sample is far outside the tolerance: the rule can tell samples apart.
  const auto a = analysis::regeneratePatches(1234, 0, 0, "vision", 4, 8);
  const auto b = analysis::regeneratePatches(1234, 0, 1, "vision", 4, 8);
  double apart = 0;
  for (size_t i = 0; i < a->size(); ++i)
    apart = std::max(apart, double{std::fabs((*a)[i] - (*b)[i])});
  EXPECT_GT(apart, 0.5);
}

TEST(SampleData, FewerThanSixteenValuesAreNotRegenerated) {
  EXPECT_FALSE(analysis::regeneratePatches(1234, 0, 0, "vision", 3, 5).has_value());
}
