// The resolved settings analysis judges a run by (core/analysis/RunSetup.h): what the run file
// recorded at record time, whatever its stored config text now says; and, for a file recorded
// before the run file held them, the same settings derived from that text.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/analysis/OptimizerStep.h"
#include "core/analysis/RecordFilter.h"
#include "core/analysis/RunSetup.h"
#include "core/analysis/Samples.h"
#include "core/plan/Config.h"
#include "core/plan/RunLayout.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/Sqlite.h"

namespace stagescope::analysis {
namespace {

namespace fs = std::filesystem;

// A vision encoder (dp 2) feeding the llm (dp 2), trained with Adam.
std::string configText(int seed, const std::string& optimizer, int microBatchSize) {
  return "seed = " + std::to_string(seed) + "\niterations = 2\nmicrobatches = 2\n" +
         "micro_batch_size = " + std::to_string(microBatchSize) + "\n[optimizer]\nkind = \"" +
         optimizer +
         "\"\nlr = 0.05\n[record]\niterations = [1]\n"
         "[[modules]]\nname = \"vision\"\nkind = \"encoder\"\ndp = 2\noffset = 0\n"
         "patches = 4\npatch_dim = 8\n"
         "[[modules]]\nname = \"llm\"\nkind = \"llm\"\ndp = 2\noffset = 2\n";
}

class RunSetupFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stagescope-run-setup-" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "run.db").string();
    // What the record side writes (app/RunFileCreation: runInfoFor).
    const plan::RunConfig cfg = plan::parseConfig(configText(7, "adam", 2), "run.toml");
    events::RunInfo info;
    info.runId = "run";
    info.configText = cfg.text;
    info.worldSize = cfg.worldSize;
    info.iterations = cfg.iterations;
    info.microbatches = cfg.microbatches;
    info.level = cfg.record.level;
    info.recordFilter = cfg.record.filter();
    info.modules = plan::moduleInfos(cfg);
    info.settings = plan::runSettings(cfg);
    storage::createRunFile(path_, info);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void exec(const std::string& sql) {
    storage::Db db(path_, storage::Db::Mode::ReadWrite);
    db.exec(sql);
  }

  fs::path dir_;
  std::string path_;
};

// The judgement of the recorded run: seed 7, Adam, micro_batch_size 2 (4 samples per
// microbatch over the llm's two replicas, 2 per replica; the encoder's 2 replicas too).
void expectRecordedSettings(const model::RunModel& run) {
  const SampleLayout samples = sampleLayoutOf(run);
  ASSERT_TRUE(samples.known) << samples.why;
  EXPECT_EQ(samples.seed, 7u);
  EXPECT_EQ(samples.globalBatch, 8);
  EXPECT_EQ(samples.perReplica("llm"), 2);
  EXPECT_EQ(samples.perReplica("vision"), 2);
  EXPECT_EQ(samples.firstSample("llm", 1, 1), 6);
  EXPECT_EQ(judgeOptimizerSteps(run).optimizer.rfind("adam lr 0.05", 0), 0u)
      << judgeOptimizerSteps(run).optimizer;
  EXPECT_EQ(recordFilterOf(run).iterations, std::vector<int32_t>{1});
}

TEST_F(RunSetupFile, AnalysisReadsTheRecordedSettingsNotTheConfigText) {
  const model::RunModel recorded = storage::loadRun(path_);
  ASSERT_TRUE(recorded.info.settings.recorded);
  EXPECT_FALSE(runSetupOf(recorded).fromConfigText);
  expectRecordedSettings(recorded);
  // The stored text altered after recording (another seed, optimizer and batch; a parser of
  // another version would read it differently): analysis still judges what ran.
  exec("UPDATE run SET config_text = '" + configText(99, "sgd", 1) + "'");
  const model::RunModel altered = storage::loadRun(path_);
  ASSERT_EQ(altered.info.configText, configText(99, "sgd", 1));
  expectRecordedSettings(altered);
  // Even text that no longer parses at all.
  exec("UPDATE run SET config_text = 'not = [toml'");
  const model::RunModel unparsable = storage::loadRun(path_);
  expectRecordedSettings(unparsable);
  EXPECT_TRUE(runSetupOf(unparsable).known);
}

TEST_F(RunSetupFile, AFileWithoutTheSettingsTablesFallsBackToItsConfigText) {
  // A file recorded before the run file held the settings: the same format, no such tables.
  exec("DROP TABLE run_settings; DROP TABLE module_settings");
  const model::RunModel old = storage::loadRun(path_);
  EXPECT_FALSE(old.info.settings.recorded);
  const RunSetup setup = runSetupOf(old);
  ASSERT_TRUE(setup.known) << setup.why;
  EXPECT_TRUE(setup.fromConfigText);
  EXPECT_EQ(setup.settings.optimizer.kind, events::OptimizerKind::Adam);
  ASSERT_NE(setup.llm(), nullptr);
  EXPECT_EQ(setup.llm()->name, "llm");
  expectRecordedSettings(old);
  // There the text is all there is: what it says is what the run is judged by.
  exec("UPDATE run SET config_text = '" + configText(99, "sgd", 1) + "'");
  const model::RunModel altered = storage::loadRun(path_);
  EXPECT_EQ(sampleLayoutOf(altered).seed, 99u);
  EXPECT_EQ(judgeOptimizerSteps(altered).optimizer.rfind("sgd lr 0.05", 0), 0u);
}

TEST(RunSetup, ARunWithoutSettingsOrConfigIsUnknown) {
  model::RunModel captured;  // a captured job that declared nothing
  const RunSetup s = runSetupOf(captured);
  EXPECT_FALSE(s.known);
  EXPECT_EQ(s.why, "the run has no stagescope config (a captured job)");
  EXPECT_FALSE(sampleLayoutOf(captured).known);
  EXPECT_EQ(judgeOptimizerSteps(captured).why, "the run's config text does not parse");
}

}  // namespace
}  // namespace stagescope::analysis
