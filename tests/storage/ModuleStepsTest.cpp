// The module_steps table (events/ModuleStep.h) through ShardWriter -> mergeShards -> loadRun: a
// reduction row and a loss-scale row come back field by field, what a helper did not know comes
// back unset (NULL in the file), and a value outside the vocabulary is one clear error.
#include <gtest/gtest.h>

#include <cmath>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunFileError.h"
#include "storage/RunReader.h"
#include "storage/Schema.h"
#include "storage/ShardWriter.h"

namespace stagescope::storage::test {
namespace {

using events::LossNormalisation;
using events::RecordLevel;

std::string writeRun(const TempDir& dir) {
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(2, RecordLevel::Stats));
  for (int rank = 0; rank < 2; ++rank) {
    auto w = ShardWriter::open(shardPathFor(run, rank), RecordLevel::Stats, rank);
    events::ModuleStepRecord reduction;
    reduction.rank = rank;
    reduction.iteration = 1;
    reduction.module = rank ? "llm" : "vision";
    reduction.dp = rank;
    reduction.normalisation = rank ? LossNormalisation::PerToken : LossNormalisation::Mean;
    reduction.microbatches = 4;
    reduction.tokens = rank ? 64 : -1;
    reduction.globalTokens = rank ? 128 : -1;
    w->moduleStep(reduction);
    events::ModuleStepRecord scale;
    scale.rank = rank;
    scale.iteration = 1;
    scale.module = reduction.module;
    scale.lossScale = 8;
    scale.lossScaleAfter = rank ? 8 : 4;
    scale.foundInf = rank ? 0 : 1;
    scale.skipped = 1;
    w->moduleStep(scale);
  }
  EXPECT_TRUE(mergeShards(run, findShards(run)).ok());
  return run;
}

TEST(ModuleSteps, ReductionAndLossScaleRowsRoundTrip) {
  TempDir dir;
  const model::RunModel m = loadRun(writeRun(dir));
  ASSERT_EQ(m.moduleSteps.size(), 4u);
  // sorted by (iteration, module, rank): llm's two rows, then vision's
  const auto& llm = m.moduleSteps[0];
  EXPECT_EQ(llm.module.str(), "llm");
  EXPECT_EQ(llm.rank, 1);
  EXPECT_EQ(llm.dp, 1);
  EXPECT_EQ(llm.normalisation, LossNormalisation::PerToken);
  EXPECT_EQ(llm.microbatches, 4);
  EXPECT_EQ(llm.tokens, 64);
  EXPECT_EQ(llm.globalTokens, 128);
  EXPECT_FALSE(llm.hasLossScale());  // NULL scale, found_inf and skipped: not recorded
  const auto& vision = m.moduleSteps[3];
  EXPECT_EQ(vision.module.str(), "vision");
  EXPECT_FALSE(vision.hasReduction());
  EXPECT_EQ(vision.lossScale, 8);
  EXPECT_EQ(vision.lossScaleAfter, 4);
  EXPECT_EQ(vision.foundInf, 1);
  EXPECT_EQ(vision.skipped, 1);
  EXPECT_EQ(vision.dp, -1);
  EXPECT_EQ(m.moduleSteps[2].normalisation, LossNormalisation::Mean);
  EXPECT_EQ(m.moduleSteps[2].tokens, -1);
}

TEST(ModuleSteps, AnUnknownNormalisationIsOneClearError) {
  TempDir dir;
  const std::string run = writeRun(dir);
  execSql(run, "UPDATE module_steps SET normalisation = 'median' WHERE normalisation = 'mean'");
  try {
    loadRun(run);
    FAIL() << "loaded a normalisation outside the vocabulary";
  } catch (const RunFileError& e) {
    EXPECT_NE(std::string(e.what()).find("table module_steps: unknown value 'median'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace stagescope::storage::test
