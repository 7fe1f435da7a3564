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

}  // namespace
}  // namespace stagescope::testing
