// `stagescope compare` judges a run's coverage (planned against recorded actions and message
// sides) before it frees the runs' plans for the alignment (app/main.cpp): a run file that lost
// the last iteration of one rank's actions is INCOMPLETE against its complete original, in
// either order, and never IDENTICAL; the original against itself is IDENTICAL.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "storage/Schema.h"
#include "storage/Sqlite.h"
#include "tests/debug/DebugUtil.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

namespace fs = std::filesystem;

TEST(CompareCoverage, ARunMissingPlannedActionsIsIncompleteInEitherOrder) {
  const RunOutput clean = runStagescope(debugConfig("pipe3"), {}, "compare-coverage", 180);
  ASSERT_EQ(clean.exitCode, 0) << clean.output;
  const std::string cut = clean.runPath + ".cut.db";
  fs::copy_file(clean.runPath, cut);
  {
    storage::Db db = storage::openStagescopeFile(cut, true);
    const int64_t last = db.queryInt("SELECT max(iteration) FROM actions WHERE rank = 1");
    ASSERT_GT(last, 0);
    db.exec("DELETE FROM actions WHERE rank = 1 AND iteration = " + std::to_string(last));
    ASSERT_GT(db.queryInt("SELECT count(*) FROM plan WHERE rank = 1 AND iteration = " +
                          std::to_string(last)),
              0);
  }
  const CliResult same = runCli({"compare", clean.runPath, clean.runPath});
  EXPECT_EQ(same.exitCode, 0) << same.output;
  EXPECT_NE(same.output.find("IDENTICAL"), std::string::npos) << same.output;
  for (const auto& [a, b] : {std::pair{clean.runPath, cut}, std::pair{cut, clean.runPath}}) {
    const CliResult r = runCli({"compare", a, b});
    EXPECT_EQ(r.exitCode, 19) << r.output;  // analysis::exitCodeOf(Verdict::Incomplete)
    EXPECT_NE(r.output.find("INCOMPLETE"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("IDENTICAL"), std::string::npos) << r.output;
  }
  if (!HasFailure()) {
    fs::remove(cut);
    fs::remove(clean.runPath);
  }
}

}  // namespace
}  // namespace stagescope::testing
