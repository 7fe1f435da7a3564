// The viewer and the CLI name the same problems on real runs: a NaN planted in the
// vision->llm bridge activation (iteration 1, microbatch 2) against a clean run of the same
// config.  `stagescope compare --json` and the viewer's compare (ui/RunComparison) must give
// the same verdict and the same first divergent message; the viewer's first non-finite record
// must be that bridge message.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/debug/DebugUtil.h"
#include "tests/engine/RunHarness.h"
#include "ui/LoadedRun.h"
#include "ui/RunComparison.h"

namespace stagescope::testing {
namespace {

TEST(ViewerAgreement, FirstDivergenceAndFirstNonFiniteOfAPlantedBridgeNaN) {
  const std::string config = debugConfig("pipe3");
  RunOutput clean = runStagescope(config, {}, "agree-clean", 180);
  ASSERT_EQ(clean.exitCode, 0) << clean.output;
  RunOutput nan = runStagescope(
      config, {"--fault", "nan:iteration=1,microbatch=2,module=vision,direction=activation"},
      "agree-nan", 180);
  ASSERT_EQ(nan.exitCode, 0) << nan.output;  // the run completes; its values are poisoned

  const std::string json = nan.runPath + ".compare.json";
  CliResult cli = runCli({"compare", clean.runPath, nan.runPath, "--json", json});
  ASSERT_NE(cli.exitCode, 0) << cli.output;  // diverged
  std::ifstream in(json);
  nlohmann::json report = nlohmann::json::parse(in);
  const auto& first = report["transfers"]["first_divergent"];
  ASSERT_TRUE(first.is_object()) << report.dump(2);

  auto a = ui::openRun(clean.runPath);
  auto b = ui::openRun(nan.runPath);
  auto viewer = ui::compareForViewer(*a, *b);
  EXPECT_EQ(std::string(analysis::toString(viewer->verdict)), report["verdict"].get<std::string>());
  ASSERT_TRUE(viewer->firstDivergent.has_value()) << viewer->verdictReason;
  EXPECT_EQ(viewer->firstDivergent->edge, first["edge"].get<std::string>());
  EXPECT_EQ(viewer->firstDivergent->iteration, first["iteration"].get<int>());
  EXPECT_EQ(viewer->firstDivergent->microbatch, first["microbatch"].get<int>());
  // The poisoned message itself.
  EXPECT_EQ(viewer->firstDivergent->edge, "vision->llm");
  EXPECT_EQ(viewer->firstDivergent->iteration, 1);
  EXPECT_EQ(viewer->firstDivergent->microbatch, 2);

  // The viewer's first non-finite record in the poisoned run is the bridge send.
  const ui::NonFinite& n = b->problems.firstNonFinite;
  ASSERT_EQ(n.kind, ui::NonFinite::Kind::Transfer);
  const auto& t = b->model.transfers[n.index];
  EXPECT_EQ(t.edge, "vision->llm");
  EXPECT_EQ(t.side, events::Side::Send);
  EXPECT_EQ(t.iteration, 1);
  EXPECT_EQ(t.microbatch, 2);
}

}  // namespace
}  // namespace stagescope::testing
