// Same config and seed: bitwise-identical runs on CPU.  Different layouts of one model:
// the same losses (within 1e-6 relative).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "storage/RunReader.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

std::map<std::tuple<int, std::string, int, int, int>, uint64_t> gradientChecksums(
    const model::RunModel& run) {
  std::map<std::tuple<int, std::string, int, int, int>, uint64_t> out;
  for (const auto& g : run.gradients) {
    if (g.phase == events::GradPhase::Reduced)
      out[{g.iteration, g.param, g.tp, g.pp, g.dp}] = g.checksum;
  }
  return out;
}

TEST(Determinism, SameConfigAndSeedGiveBitwiseIdenticalRuns) {
  RunOutput a = runStagescope(assetConfig("default"), {}, "det-a");
  RunOutput b = runStagescope(assetConfig("default"), {}, "det-b");
  ASSERT_EQ(a.exitCode, 0) << a.output;
  ASSERT_EQ(b.exitCode, 0) << b.output;
  auto ra = storage::loadRun(a.runPath), rb = storage::loadRun(b.runPath);
  ASSERT_EQ(ra.transfers.size(), rb.transfers.size());
  ASSERT_GT(ra.transfers.size(), 0u);
  for (size_t i = 0; i < ra.transfers.size(); ++i) {
    EXPECT_EQ(ra.transfers[i].checksum, rb.transfers[i].checksum) << "transfer " << i;
    EXPECT_NE(ra.transfers[i].checksum, 0u);
  }
  auto ga = gradientChecksums(ra), gb = gradientChecksums(rb);
  ASSERT_FALSE(ga.empty());
  EXPECT_EQ(ga, gb);
  auto la = iterationLosses(ra, false), lb = iterationLosses(rb, false);
  EXPECT_EQ(la, lb);
}

TEST(Determinism, RunRepeatProvesBitwiseIdentityAndCheckAgainstNamesADifference) {
  RunOutput rep = runStagescope(assetConfig("single"), {"--repeat", "2"}, "repeat");
  ASSERT_EQ(rep.exitCode, 0) << rep.output;
  EXPECT_NE(rep.output.find("bitwise comparison with run repeat-1: identical"), std::string::npos)
      << rep.output;
  // A different seed: `check --against` fails with the against class (exit 18).
  RunOutput other = runStagescope(assetConfig("single"), {"--set", "seed=7"}, "repeat-other");
  ASSERT_EQ(other.exitCode, 0) << other.output;
  const std::string first = tempRunPath("repeat-0");
  std::string cmd = "'" + stagescopeExe() + "' check '" + first + "' --against '" + other.runPath +
                    "' > /dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 18);
}

TEST(Determinism, DifferentSeedsDiffer) {
  RunOutput a = runStagescope(assetConfig("default"), {}, "seed-a");
  RunOutput b = runStagescope(assetConfig("default"), {"--set", "seed=99"}, "seed-b");
  ASSERT_EQ(a.exitCode, 0) << a.output;
  ASSERT_EQ(b.exitCode, 0) << b.output;
  auto la = iterationLosses(storage::loadRun(a.runPath), false);
  auto lb = iterationLosses(storage::loadRun(b.runPath), false);
  ASSERT_EQ(la.size(), 2u);
  EXPECT_NE(la[0], lb[0]);
}

TEST(LayoutIndependence, DifferentLayoutsOfOneModelGiveTheSameLosses) {
  RunOutput a = runStagescope(assetConfig("default"), {}, "layout-a");
  // Same model and seed, everything on other ranks: vision tp1 dp1 on rank 0, llm pp4 on 1-4.
  RunOutput b = runStagescope(
      assetConfig("default"),
      {"--set", "modules.vision.tp=1", "--set", "modules.vision.dp=1", "--set",
       "modules.llm.offset=1", "--set", "modules.llm.tp=1", "--set", "modules.llm.pp=4"},
      "layout-b");
  ASSERT_EQ(a.exitCode, 0) << a.output;
  ASSERT_EQ(b.exitCode, 0) << b.output;
  auto la = iterationLosses(storage::loadRun(a.runPath), false);
  auto lb = iterationLosses(storage::loadRun(b.runPath), false);
  ASSERT_EQ(la.size(), 2u);
  for (auto& [it, loss] : la)
    EXPECT_NEAR(loss, lb[it], 1e-6 * std::abs(loss)) << "iteration " << it;
}

TEST(Dtype, Bfloat16RunMovesBfloat16AndTracksTheFloat32Loss) {
  RunOutput f32 = runStagescope(assetConfig("default"), {}, "dtype-f32");
  RunOutput bf16 = runStagescope(assetConfig("default"), {"--set", "dtype=\"bfloat16\"", "--check"},
                                 "dtype-bf16");
  ASSERT_EQ(f32.exitCode, 0) << f32.output;
  ASSERT_EQ(bf16.exitCode, 0) << bf16.output;  // every check passes in bf16 too
  auto run = storage::loadRun(bf16.runPath);
  ASSERT_FALSE(run.transfers.empty());
  for (const auto& t : run.transfers) EXPECT_EQ(t.dtype, "bfloat16") << t.edge;
  auto la = iterationLosses(storage::loadRun(f32.runPath), false), lb = iterationLosses(run, false);
  ASSERT_EQ(lb.size(), 2u);
  for (auto& [it, loss] : la) {
    EXPECT_NEAR(lb[it], loss, 1e-2 * loss) << "iteration " << it;  // bf16 has 8 mantissa bits
    EXPECT_NE(lb[it], loss) << "the bf16 run really computed in bf16";
  }
}

// A bfloat16 run is judged against the float32 truth: `--reference` computes each iteration in
// float32 from the run's own parameters at the start of that iteration, and also in bfloat16
// from the same parameters (how far bfloat16's arithmetic alone moves each gradient); check's
// reference_gradient applies the documented low-precision bound, scaled per gradient by that
// distance (core/analysis/Tolerance.h; docs/analysis.md gives the measurements).  The float32
// bound of iteration 0 would fail the same file: the run really deviates as bf16 does, and the
// bound is what lets it pass.
TEST(Dtype, Bfloat16IsCheckedAgainstTheFloat32ReferenceWithTheDocumentedBound) {
  RunOutput bf16 = runStagescope(
      assetConfig("fan_out"),
      {"--set", "dtype=\"bfloat16\"", "--record", "full", "--reference", "--check"}, "bf16-ref");
  ASSERT_EQ(bf16.exitCode, 0) << bf16.output;
  EXPECT_NE(bf16.output.find("PASS  reference_gradient"), std::string::npos) << bf16.output;
  EXPECT_EQ(bf16.output.find("not computed"), std::string::npos) << bf16.output;
  auto run = storage::loadRun(bf16.runPath);
  ASSERT_FALSE(run.referenceGradients.empty());
  // Per (iteration, parameter): one float32 truth and one bfloat16 computation.
  std::map<std::tuple<int, std::string, std::string>, int> refs;
  for (const auto& g : run.referenceGradients) ++refs[{g.iteration, g.param, g.dtype}];
  std::map<std::pair<int, std::string>, int> reduced;
  for (const auto& g : run.gradients) {
    EXPECT_EQ(g.dtype, "bfloat16") << g.param;
    if (g.phase == events::GradPhase::Reduced) reduced[{g.iteration, g.param}] = 1;
  }
  ASSERT_EQ(refs.size(), 2 * reduced.size());
  for (const auto& [key, n] : reduced) {
    EXPECT_EQ((refs[{key.first, key.second, "float32"}]), 1) << key.second;
    EXPECT_EQ((refs[{key.first, key.second, "bfloat16"}]), 1) << key.second;
  }
  const std::string strict =
      "'" + stagescopeExe() + "' check '" + bf16.runPath + "' --tol 2e-5 > /dev/null 2>&1";
  const int status = std::system(strict.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 17);  // reference_gradient
}

// Below level full a bfloat16 run's parameters after each step are not in the file, so only
// iteration 0 (whose parameters are the initial draw rounded to bfloat16) has a reference; check
// compares it and names the iterations it could not compare, instead of passing them silently.
TEST(Dtype, Bfloat16AtLevelStatsIsComparedWhereTheReferenceKnowsTheRunsParameters) {
  RunOutput bf16 =
      runStagescope(assetConfig("fan_out"),
                    {"--set", "dtype=\"bfloat16\"", "--reference", "--check"}, "bf16-ref-stats");
  ASSERT_EQ(bf16.exitCode, 0) << bf16.output;
  EXPECT_NE(bf16.output.find("reference: iteration 1 not computed: the bfloat16 run's parameters "
                             "after the step of iteration 0 are not in the file with values"),
            std::string::npos)
      << bf16.output;
  EXPECT_NE(bf16.output.find("PASS  reference_gradient"), std::string::npos) << bf16.output;
  EXPECT_NE(bf16.output.find("not compared: iteration 1 (no reference"), std::string::npos)
      << bf16.output;
  auto run = storage::loadRun(bf16.runPath);
  ASSERT_FALSE(run.referenceGradients.empty());
  for (const auto& g : run.referenceGradients) EXPECT_EQ(g.iteration, 0) << g.param;
}

// Every send has exactly one receive with the same checksum and shape, and each edge
// carries m activations and m gradients per iteration, in an 8-rank multimodule run.
// Below level full a float32 run's parameters after each step are not in the file, so the
// reference follows its own trajectory after iteration 0, and Adam carries float32 round-off into
// lr-sized steps: on this correct layout (Adam lr 0.05) the gradient norms of iteration 3 on were
// up to 0.9 % from the reference's and check failed 149 of them against the fixed 1e-3.  The
// reference also runs that trajectory in float64 (float64 rows for iterations 1 on, none for
// iteration 0), and each gradient's bound becomes max(1e-3, 10 x the distance of its float32
// trajectory from the float64 one): 3 x held here until a rounding change in the model's forward
// (parameters resolved once per block) moved this run to 6.1 x, a false failure.  A reduced
// gradient scaled by 1.5 in the last iteration still fails.
TEST(Reference, Float32TrajectoryBelowLevelFullIsBoundedByItsFloat64Twin) {
  RunOutput run = runStagescope(sourcePath("tests/engine/sweep/adam_key_bias_trajectory.toml"),
                                {"--record", "stats", "--set", "record.level=\"stats\"", "--set",
                                 "iterations=8", "--reference", "--check"},
                                "f32-trajectory", 600);
  ASSERT_EQ(run.exitCode, 0) << run.output;
  EXPECT_NE(run.output.find("on the reference's own trajectory: max(the bound, 10 x"),
            std::string::npos)
      << run.output;
  auto model = storage::loadRun(run.runPath);
  std::map<std::string, std::set<int>> iterationsOf;  // dtype -> iterations with rows
  for (const auto& g : model.referenceGradients) iterationsOf[g.dtype].insert(g.iteration);
  EXPECT_EQ(iterationsOf["float32"], (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(iterationsOf["float64"], (std::set<int>{1, 2, 3, 4, 5, 6, 7}));
  const std::string planted = tempRunPath("f32-trajectory-scaled");
  std::filesystem::copy_file(run.runPath, planted);
  const std::string scale =
      "sqlite3 '" + planted +
      "' \"UPDATE gradients SET norm = norm * 1.5 WHERE phase = 'reduced' AND "
      "iteration = 7 AND param = 'llm.head.weight'\"";
  ASSERT_EQ(std::system(scale.c_str()), 0);
  const std::string check = "'" + stagescopeExe() + "' check '" + planted + "' > /dev/null 2>&1";
  const int status = std::system(check.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 17);  // reference_gradient
}

TEST(Transfers, EverySendHasOneMatchingReceiveAndCountsMatchThePlan) {
  RunOutput out = runStagescope(assetConfig("default"), {}, "pairs");
  ASSERT_EQ(out.exitCode, 0) << out.output;
  auto run = storage::loadRun(out.runPath);
  ASSERT_EQ(run.ranks.size(), 8u);
  ASSERT_FALSE(run.pairs.empty());
  std::map<std::tuple<std::string, int, int, int, int>, int> perEdge;  // edge,dir,it,src,dst
  for (const auto& p : run.pairs) {
    ASSERT_TRUE(p.complete());
    EXPECT_TRUE(p.shapeMatches);
    EXPECT_TRUE(p.checksumMatches);
    const auto& s = run.transfers[p.send];
    const auto& r = run.transfers[p.recv];
    EXPECT_EQ(s.checksum, r.checksum);
    EXPECT_NE(s.checksum, 0u);
    EXPECT_EQ(s.shape, r.shape);
    ++perEdge[{s.edge, static_cast<int>(s.direction), s.iteration, s.srcRank, s.dstRank}];
  }
  const int m = run.info.microbatches;
  for (const auto& [key, n] : perEdge) {
    EXPECT_EQ(n, m) << std::get<0>(key) << " " << std::get<3>(key) << "->" << std::get<4>(key);
  }
  // default.toml: 2 fan-in leaders -> llm leader, 2 P2P pairs (tp 0, 1); both directions; 2
  // iterations.
  EXPECT_EQ(perEdge.size(), (2u + 2u) * 2u * 2u);
}

}  // namespace
}  // namespace stagescope::testing
