// Plan rows are written per iteration as it starts: a run configured for 10^6 iterations
// starts at once and its plan rows grow with the iterations executed (here: killed in
// iteration 3), and check's plan_order judges what was written.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "storage/Schema.h"
#include "storage/Sqlite.h"
#include "tests/debug/DebugUtil.h"

namespace stagescope::testing {
namespace {

namespace fs = std::filesystem;

TEST(LazyPlan, MillionIterationRunStartsAndPlanRowsFollowExecution) {
  const fs::path dir =
      fs::temp_directory_path() / ("stagescope-lazyplan-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string out = (dir / "soak.db").string();
  // Before plan rows were lazy, each rank wrote 10^6 iterations of plan before its first step:
  // this run did not reach iteration 3 within the limit below.
  const CliResult run =
      runCli({"run", debugConfig("pipe3"), "--set", "iterations=1000000", "--set",
              "timeout_seconds=30", "--fault", "kill:rank=2,iteration=3", "-o", out, "-q"},
             150);
  ASSERT_EQ(run.exitCode, 10) << run.output;
  EXPECT_NE(run.output.find("rank 2 was killed by signal 9"), std::string::npos) << run.output;

  storage::Db db = storage::openStagescopeFile(out, false);
  for (int r = 0; r < 3; ++r) {
    const std::string rank = std::to_string(r);
    const int64_t planned =
        db.queryInt("SELECT count(DISTINCT iteration) FROM plan WHERE rank = " + rank);
    const int64_t executed =
        db.queryInt("SELECT count(DISTINCT iteration) FROM actions WHERE rank = " + rank);
    const int64_t last = db.queryInt("SELECT max(iteration) FROM plan WHERE rank = " + rank);
    EXPECT_GE(planned, 3) << "rank " << r;  // iterations 0-2 completed everywhere
    EXPECT_LE(last, 4) << "rank " << r;     // nothing planned beyond where the run stopped
    // Every executed iteration was planned; at most the one a rank was stopped in (its plan
    // written, no action completed yet) is planned without an executed action.
    EXPECT_GE(planned, executed) << "rank " << r;
    EXPECT_LE(planned, executed + 1) << "rank " << r;
  }

  const CliResult check = runCli({"check", out});
  EXPECT_NE(check.output.find("PASS  plan_order"), std::string::npos) << check.output;
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace stagescope::testing
