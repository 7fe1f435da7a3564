// A real run with a record filter by rank, module and iteration writes only the rows the
// filter keeps (actions, transfers, gradients, losses, plan), and `check` passes it, saying
// what it skipped (one rule: events::RecordFilter::keeps, in the ranks and in the analysis).
#include <gtest/gtest.h>

#include <string>

#include "storage/Schema.h"
#include "storage/Sqlite.h"
#include "tests/debug/DebugUtil.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

TEST(RecordFilterRun, WritesOnlyTheFilteredRowsAndCheckSaysWhatItSkipped) {
  const std::string out = tempRunPath("record-filter-run");
  // pipe3: vision on rank 0, llm pp0 on rank 1, llm pp1 on rank 2.  The filter keeps rank 2
  // only (rank 0 is listed but is not an llm rank) in iteration 1 of 3.
  const CliResult run =
      runCli({"run", debugConfig("pipe3"), "--set", "iterations=3", "--set", "record.level=full",
              "--set", "record.ranks=[0, 2]", "--set", "record.modules=[\"llm\"]", "--set",
              "record.iterations=[1]", "-o", out, "-q"},
             150);
  ASSERT_EQ(run.exitCode, 0) << run.output;

  storage::Db db = storage::openStagescopeFile(out, false);
  for (const char* table : {"actions", "transfers", "gradients", "losses", "plan"}) {
    const std::string t = table;
    EXPECT_GT(db.queryInt("SELECT count(*) FROM " + t), 0) << t;
    EXPECT_EQ(db.queryInt("SELECT count(*) FROM " + t + " WHERE rank <> 2 OR iteration <> 1"), 0)
        << t << " holds rows the filter drops";
  }
  // Rank 2's side of every message of iteration 1 is there: 4 activations received from rank 1,
  // 4 gradients sent back.
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM transfers"), 8);

  const CliResult check = runCli({"check", out});
  EXPECT_EQ(check.exitCode, 0) << check.output;
  const std::string filter =
      "record.ranks = [0, 2]; record.modules = [llm]; record.iterations = [1]";
  EXPECT_NE(check.output.find("outside the record filter (" + filter + ") skipped"),
            std::string::npos)
      << check.output;
}

// A colocated rank is kept whole when the filter keeps any module it holds (docs/run-file.md):
// colocated.toml puts vision and audio on ranks 0-1 with llm stage 0, so record.modules = [llm]
// keeps their plan rows, inputs and gradients on those ranks too, and check passes the run.
// (The executor and the plan rows once filtered per module: vision's and audio's gradients and
// plan rows were dropped while their hand-offs were kept, and check failed message_count.)
TEST(RecordFilterRun, ColocatedRankIsKeptWhole) {
  const std::string out = tempRunPath("record-filter-colocated");
  const CliResult run =
      runCli({"run", assetConfig("colocated"), "--set", "iterations=1", "--set",
              "record.level=full", "--set", "record.modules=[\"llm\"]", "-o", out, "-q"},
             150);
  ASSERT_EQ(run.exitCode, 0) << run.output;
  storage::Db db = storage::openStagescopeFile(out, false);
  for (const char* module : {"vision", "audio"}) {
    const std::string m = module;
    for (const char* table : {"plan", "gradients", "inputs"}) {
      EXPECT_GT(db.queryInt("SELECT count(*) FROM " + std::string(table) + " WHERE module = '" + m +
                            "' AND rank IN (0, 1)"),
                0)
          << table << " has no row of " << m << " on the colocated ranks 0-1";
    }
  }
  const CliResult check = runCli({"check", out});
  EXPECT_EQ(check.exitCode, 0) << check.output;
}

// A ranks filter that leaves out one TP rank leaves that rank's shards out of every TP-split
// gradient: reference_gradient skips those gradients (the filter explains the gap) instead of
// failing them as "TP shards do not cover the full tensor" (it did; the other checks passed).
TEST(RecordFilterRun, FilteredTensorParallelShardIsSkipped) {
  const std::string out = tempRunPath("record-filter-tp");
  // single.toml with the llm at tp 2: vision on rank 0, the llm's two TP ranks 1 and 2.
  const CliResult run =
      runCli({"run", assetConfig("single"), "--set", "iterations=1", "--set", "modules.llm.tp=2",
              "--set", "record.ranks=[0, 1]", "--reference", "-o", out, "-q"},
             150);
  ASSERT_EQ(run.exitCode, 0) << run.output;
  const CliResult check = runCli({"check", out});
  EXPECT_EQ(check.exitCode, 0) << check.output;
  EXPECT_NE(check.output.find("not recorded by the record filter (skipped)"), std::string::npos)
      << check.output;
}

// A ranks filter that leaves out one pipeline stage of a module leaves its parameters out
// entirely: reference_gradient skips them ("no reduced gradient of llm.tok_embed" failed it
// while another stage of the llm was kept).
TEST(RecordFilterRun, FilteredPipelineStageIsSkipped) {
  const std::string out = tempRunPath("record-filter-pp");
  // single.toml with the llm at pp 2: vision on rank 0, llm stage 0 on rank 1, stage 1 on 2.
  const CliResult run = runCli(
      {"run", assetConfig("single"), "--set", "iterations=1", "--set", "modules.llm.pp=2", "--set",
       "modules.llm.layers=2", "--set", "record.ranks=[0, 2]", "--reference", "-o", out, "-q"},
      150);
  ASSERT_EQ(run.exitCode, 0) << run.output;
  const CliResult check = runCli({"check", out});
  EXPECT_EQ(check.exitCode, 0) << check.output;
  EXPECT_NE(check.output.find("not recorded by the record filter (skipped)"), std::string::npos)
      << check.output;
}

}  // namespace
}  // namespace stagescope::testing
