// The gradient audit (GradientAudit.h) and one loss scale (LossScale.h) over synthetic captured
// runs: vision dp2 -> llm dp1, each module's gradients before and after its reduction and its
// module_steps rows, as stagescope_torch.megatron's audited_finalize / audited_step record them.
// Each planted defect is named with its cause; the correct run passes; check's nonfinite does
// not fail on a handled (skipped) overflow and still fails on one nobody handled.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/analysis/Check.h"
#include "core/analysis/GradientAudit.h"
#include "core/analysis/LossScale.h"

namespace stagescope::analysis {
namespace {

using events::GradPhase;
using events::LossNormalisation;

events::GradientRecord grad(const std::string& module, const std::string& param, int rank, int dp,
                            GradPhase phase, const std::vector<float>& v, bool values,
                            int iteration = 0) {
  events::GradientRecord g;
  g.rank = rank;
  g.iteration = iteration;
  g.microbatch = phase == GradPhase::Accumulated ? 1 : -1;
  g.phase = phase;
  g.module = module;
  g.param = param;
  g.dp = dp;
  g.shape = std::vector<int64_t>{static_cast<int64_t>(v.size())};
  g.fullShape = g.shape;
  g.dtype = "float32";
  double sq = 0, sum = 0;
  int64_t inf = 0;
  for (float x : v) {
    if (!std::isfinite(x)) {
      ++inf;
      continue;
    }
    sq += double(x) * x;
    sum += x;
  }
  g.norm = inf ? INFINITY : std::sqrt(sq);
  g.hasStats = true;
  g.stats.numel = static_cast<int64_t>(v.size());
  g.stats.infCount = inf;
  g.stats.mean = sum / double(v.size() - inf);
  g.stats.l2 = g.norm;
  if (values) {
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    g.payload = std::move(bytes);
  }
  return g;
}

events::ModuleStepRecord reduction(const std::string& module, int rank, int dp, LossNormalisation n,
                                   int64_t globalTokens = -1, int iteration = 0) {
  events::ModuleStepRecord s;
  s.rank = rank;
  s.iteration = iteration;
  s.module = module;
  s.dp = dp;
  s.normalisation = n;
  s.microbatches = 2;
  s.globalTokens = globalTokens;
  return s;
}

// vision dp2 (ranks 0, 1) -> llm dp1 (rank 2).  The vision replicas' own gradients are a and b;
// the reduced vision gradient is `factor` x (a + b) x c, c the correct normalisation (1/d_L for a
// mean llm, 1/N for a per-token one).
model::RunModel fanIn(double factor, LossNormalisation vision, LossNormalisation llm,
                      bool values = true) {
  model::RunModel run;
  run.info.level = values ? events::RecordLevel::Full : events::RecordLevel::Stats;
  run.info.modules = {{"vision", "encoder", 1, 1, 1, 2, 0, 1, {"llm"}},
                      {"llm", "llm", 1, 1, 1, 1, 2, 1, {}}};
  const int64_t tokens = 16;
  const double c = llm == LossNormalisation::PerToken ? 1.0 / tokens : 1.0;
  const std::vector<float> a = {0.5f, -1.0f, 2.0f}, b = {1.5f, 0.25f, -0.5f};
  const std::vector<float> w = {0.1f, 0.2f}, wb = {-0.3f, 0.4f};
  std::vector<float> sum(3), bsum(2);
  for (int i = 0; i < 3; ++i) sum[i] = static_cast<float>(factor * c * (a[i] + b[i]));
  for (int i = 0; i < 2; ++i) bsum[i] = static_cast<float>(factor * c * (w[i] + wb[i]));
  for (int dp = 0; dp < 2; ++dp) {
    run.gradients.push_back(
        grad("vision", "vision.pp0.weight", dp, dp, GradPhase::Accumulated, dp ? b : a, values));
    run.gradients.push_back(
        grad("vision", "vision.pp0.bias", dp, dp, GradPhase::Accumulated, dp ? wb : w, values));
    run.gradients.push_back(
        grad("vision", "vision.pp0.weight", dp, dp, GradPhase::Reduced, sum, values));
    run.gradients.push_back(
        grad("vision", "vision.pp0.bias", dp, dp, GradPhase::Reduced, bsum, values));
    run.moduleSteps.push_back(reduction("vision", dp, dp, vision));
  }
  std::vector<float> l = {1.0f, 2.0f},
                     lr = {static_cast<float>(c * 1.0), static_cast<float>(c * 2.0)};
  run.gradients.push_back(grad("llm", "llm.pp0.weight", 2, 0, GradPhase::Accumulated, l, values));
  run.gradients.push_back(grad("llm", "llm.pp0.weight", 2, 0, GradPhase::Reduced, lr, values));
  run.moduleSteps.push_back(
      reduction("llm", 2, 0, llm, llm == LossNormalisation::PerToken ? tokens : -1));
  return run;
}

const ToleranceRule kRule = toleranceFor("float32");

TEST(GradientAudit, ACorrectFanInPassesByValues) {
  for (auto llm : {LossNormalisation::Mean, LossNormalisation::PerToken}) {
    const auto rep = auditGradients(fanIn(1.0, llm, llm), kRule);
    EXPECT_TRUE(rep.findings.empty()) << rep.findings.front().sentence;
    EXPECT_EQ(rep.judged, 3);
    EXPECT_EQ(rep.byValues, 3);
  }
  // a vision module that reduces a mean under a per-token llm, corrected by its own
  // normalisation (PR #5555's fix): the numbers are right, nothing to say
  EXPECT_TRUE(
      auditGradients(fanIn(1.0, LossNormalisation::Mean, LossNormalisation::PerToken), kRule)
          .findings.empty());
}

TEST(GradientAudit, AveragingOverTheEncodersOwnDpIsSection71) {
  const auto rep =
      auditGradients(fanIn(0.5, LossNormalisation::Mean, LossNormalisation::Mean), kRule);
  ASSERT_EQ(rep.findings.size(), 1u);
  const auto& f = rep.findings[0];
  EXPECT_EQ(f.module, "vision");
  EXPECT_EQ(f.cause, "own_dp");
  EXPECT_NEAR(f.factor, 0.5, 1e-6);
  EXPECT_NE(f.sentence.find("§7.1"), std::string::npos) << f.sentence;
  EXPECT_NE(f.sentence.find("by values"), std::string::npos) << f.sentence;
}

TEST(GradientAudit, APerTokenMismatchIsNotMistakenForSection71) {
  // llm per-token, vision mean, reduced as if vision summed: x 1/d_E = 0.5, the same factor as
  // §7.1 in this layout; the recorded normalisation names the cause.
  const auto half =
      auditGradients(fanIn(0.5, LossNormalisation::Mean, LossNormalisation::PerToken), kRule);
  ASSERT_EQ(half.findings.size(), 1u);
  EXPECT_EQ(half.findings[0].cause, "normalisation") << half.findings[0].sentence;
  EXPECT_EQ(half.findings[0].sentence.find("§7.1"), std::string::npos) << half.findings[0].sentence;
  EXPECT_NE(half.findings[0].sentence.find("PR #5555"), std::string::npos)
      << half.findings[0].sentence;
  // llm mean, vision per-token: x d_E = 2
  const auto twice =
      auditGradients(fanIn(2.0, LossNormalisation::PerToken, LossNormalisation::Mean), kRule);
  ASSERT_EQ(twice.findings.size(), 1u);
  EXPECT_EQ(twice.findings[0].cause, "normalisation");
  EXPECT_NEAR(twice.findings[0].factor, 2.0, 1e-6);
}

TEST(GradientAudit, APerTokenLossNeverDividedByItsTokenCountIsNamed) {
  // both per-token, vision summed over its replicas and never divided by the 16 tokens
  // (megatron-core 0.19.2's per-module finalize on an encoder rank: its num_tokens is 0)
  const auto rep =
      auditGradients(fanIn(16.0, LossNormalisation::PerToken, LossNormalisation::PerToken), kRule);
  ASSERT_EQ(rep.findings.size(), 1u);
  EXPECT_EQ(rep.findings[0].cause, "tokens") << rep.findings[0].sentence;
  EXPECT_NE(rep.findings[0].sentence.find("never divided by the global token count 16"),
            std::string::npos)
      << rep.findings[0].sentence;
}

TEST(GradientAudit, LevelStatsJudgesByElementSumsAndSaysSo) {
  const auto ok =
      auditGradients(fanIn(1.0, LossNormalisation::Mean, LossNormalisation::Mean, false), kRule);
  EXPECT_TRUE(ok.findings.empty());
  EXPECT_EQ(ok.bySums, 3);
  EXPECT_NE(ok.summary().find("by element sums"), std::string::npos) << ok.summary();
  const auto bad =
      auditGradients(fanIn(0.5, LossNormalisation::Mean, LossNormalisation::Mean, false), kRule);
  ASSERT_EQ(bad.findings.size(), 1u);
  EXPECT_EQ(bad.findings[0].cause, "own_dp");
  EXPECT_NE(bad.findings[0].sentence.find("element sums"), std::string::npos);
}

TEST(GradientAudit, OneReplicaOfAMeanLossIsJudgedBitwiseByChecksums) {
  auto run = fanIn(1.0, LossNormalisation::Mean, LossNormalisation::Mean, false);
  for (auto& g : run.gradients)
    if (g.module.str() == "llm") g.checksum = 0xabcdef;  // the reduction left the bytes alone
  const auto same = auditGradients(run, kRule);
  EXPECT_TRUE(same.findings.empty());
  EXPECT_EQ(same.byChecksums, 1);
  EXPECT_EQ(same.bySums, 2);  // vision: two replicas, no values
  EXPECT_NE(same.summary().find("1 bitwise by checksums (one replica, c = 1)"), std::string::npos)
      << same.summary();
  // other bytes: the checksums are not the verdict; the sums measure the (here equal) factor
  for (auto& g : run.gradients)
    if (g.module.str() == "llm" && g.phase == GradPhase::Reduced) g.checksum = 0x123456;
  const auto other = auditGradients(run, kRule);
  EXPECT_EQ(other.byChecksums, 0);
  EXPECT_EQ(other.bySums, 3);
}

TEST(GradientAudit, AFactorNothingExplainsIsSaidAsSuch) {
  const auto rep =
      auditGradients(fanIn(3.0, LossNormalisation::Mean, LossNormalisation::Mean), kRule);
  ASSERT_EQ(rep.findings.size(), 1u);
  EXPECT_EQ(rep.findings[0].cause, "unexplained");
  EXPECT_NEAR(rep.findings[0].factor, 3.0, 1e-6);
}

TEST(GradientAudit, AMissingReplicaIsNotJudgedAndSaid) {
  auto run = fanIn(0.5, LossNormalisation::Mean, LossNormalisation::Mean);
  std::erase_if(run.gradients,
                [](const auto& g) { return g.phase == GradPhase::Accumulated && g.dp == 1; });
  const auto rep = auditGradients(run, kRule);
  EXPECT_TRUE(rep.findings.empty());
  EXPECT_EQ(rep.notJudged, 2);
  EXPECT_NE(rep.summary().find("1 of its 2 replicas"), std::string::npos) << rep.summary();
}

// Loss-scale rows of vision (ranks 0, 1) and llm (rank 2) for three iterations; in iteration 1
// vision found Inf/NaN and every module skipped.  `synced`: both scalers halve (the fix); else
// only vision's does (megatron-core 0.19.2's MimoOptimizer).
model::RunModel scales(bool synced, bool llmSkips = true) {
  model::RunModel run = fanIn(1.0, LossNormalisation::Mean, LossNormalisation::Mean);
  const double before[3][2] = {{8, 8}, {8, 8}, {4, synced ? 4.0 : 8.0}};
  const double after[3][2] = {{8, 8}, {4, synced ? 4.0 : 8.0}, {4, synced ? 4.0 : 8.0}};
  for (int it = 0; it < 3; ++it) {
    for (int rank = 0; rank < 3; ++rank) {
      events::ModuleStepRecord s;
      s.rank = rank;
      s.iteration = it;
      s.module = rank < 2 ? "vision" : "llm";
      s.dp = rank < 2 ? rank : 0;
      const int m = rank < 2 ? 0 : 1;
      s.lossScale = before[it][m];
      s.lossScaleAfter = after[it][m];
      s.foundInf = it == 1 && rank < 2 ? 1 : 0;
      s.skipped = it == 1 && (rank < 2 || llmSkips) ? 1 : 0;
      run.moduleSteps.push_back(s);
    }
  }
  // the overflow's gradients (recorded as they were: Inf)
  run.gradients.push_back(grad("vision", "vision.pp0.weight", 0, 0, GradPhase::Reduced,
                               {INFINITY, 1.0f, 2.0f}, true, 1));
  return run;
}

TEST(LossScale, ScalersThatPartAfterAnEncoderOnlyOverflowAreNamed) {
  const auto rep = judgeLossScales(scales(false));
  ASSERT_EQ(rep.findings.size(), 1u) << rep.findings[1].sentence;
  const auto& f = rep.findings[0];
  EXPECT_EQ(f.iteration, 1);
  EXPECT_EQ(f.module, "vision");
  EXPECT_NE(f.sentence.find("vision's becomes 4, llm's 8"), std::string::npos) << f.sentence;
  EXPECT_NE(f.sentence.find("vision found Inf/NaN"), std::string::npos) << f.sentence;
  ASSERT_EQ(rep.overflows.size(), 1u);  // still handled: every module skipped
}

TEST(LossScale, SyncedScalersPassAndTheOverflowIsAnEvent) {
  const auto rep = judgeLossScales(scales(true));
  EXPECT_TRUE(rep.findings.empty()) << rep.findings.front().sentence;
  ASSERT_EQ(rep.overflows.size(), 1u);
  EXPECT_EQ(rep.overflows[0].iteration, 1);
  EXPECT_TRUE(rep.handledOverflow(1, "vision"));
  EXPECT_FALSE(rep.handledOverflow(1, "llm"));
  EXPECT_NE(rep.summary().find("1 overflow handled"), std::string::npos) << rep.summary();
}

TEST(LossScale, AModuleThatStepsOnAnOverflowFails) {
  const auto rep = judgeLossScales(scales(true, false));
  ASSERT_EQ(rep.findings.size(), 1u);
  EXPECT_EQ(rep.findings[0].module, "llm");
  EXPECT_NE(rep.findings[0].sentence.find("took its optimizer step"), std::string::npos);
  EXPECT_TRUE(rep.overflows.empty());
}

TEST(LossScale, CheckReportsAHandledOverflowAsAnEventNotANonFiniteFailure) {
  const auto handled = checkRun(scales(true));
  const auto* nf = handled.find("nonfinite");
  ASSERT_NE(nf, nullptr);
  EXPECT_EQ(nf->status, CheckStatus::Passed) << nf->summary;
  EXPECT_NE(nf->summary.find("1 non-finite gradient of a handled overflow not counted"),
            std::string::npos)
      << nf->summary;
  EXPECT_EQ(handled.find("reference_gradient")->status, CheckStatus::Passed)
      << handled.find("reference_gradient")->summary;
  // the same Inf without the loss-scale rows: nobody handled it
  auto bare = scales(true);
  std::erase_if(bare.moduleSteps, [](const auto& s) { return s.hasLossScale(); });
  EXPECT_EQ(checkRun(bare).find("nonfinite")->status, CheckStatus::Failed);
  // diverged scalers fail check's reference_gradient class with the loss-scale finding
  const auto parted = checkRun(scales(false));
  const auto* ref = parted.find("reference_gradient");
  ASSERT_EQ(ref->status, CheckStatus::Failed);
  EXPECT_NE(ref->findings.at(0).message.find("loss scale: iteration 1"), std::string::npos)
      << ref->findings.at(0).message;
  EXPECT_EQ(parted.find("nonfinite")->status, CheckStatus::Passed);
}

}  // namespace
}  // namespace stagescope::analysis
