// The viewer and the CLI name the same problems on real runs: a NaN planted in the
// vision->llm bridge activation (iteration 1, microbatch 2) against a clean run of the same
// config.  `stagescope compare --json` and the viewer's compare (ui/RunComparison) must give
// the same verdict and the same first divergence; the viewer's first non-finite record must be
// that bridge message, as `check --json` names it.
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
  const auto& first = report["first_divergence"];
  ASSERT_TRUE(first.is_object()) << report.dump(2);

  auto a = ui::openRun(clean.runPath);
  auto b = ui::openRun(nan.runPath);
  auto viewer = ui::compareForViewer(*a, *b);
  EXPECT_EQ(std::string(analysis::toString(viewer->verdict)), report["verdict"].get<std::string>());
  ASSERT_TRUE(viewer->first.has_value()) << viewer->verdictReason;
  EXPECT_EQ(viewer->first->key, first["key"].get<std::string>());
  EXPECT_EQ(viewer->firstText, first["text"].get<std::string>());
  // The poisoned message itself, and the transfer of run A the viewer jumps to.
  EXPECT_EQ(viewer->first->kind, analysis::ItemKind::Transfer);
  EXPECT_EQ(viewer->first->edge, "vision->llm");
  EXPECT_EQ(viewer->first->iteration, 1);
  EXPECT_EQ(viewer->first->microbatch, 2);
  const int64_t jump = ui::firstDivergentTransfer(*viewer);
  ASSERT_GE(jump, 0);
  EXPECT_EQ(a->model.transfers[jump].edge, "vision->llm");

  // The viewer's first non-finite record in the poisoned run is the bridge send, and it is
  // the record `check` names first.
  const ui::NonFinite& n = b->problems.firstNonFinite;
  ASSERT_EQ(n.kind, ui::NonFinite::Kind::Transfer);
  const auto& t = b->model.transfers[n.index];
  EXPECT_EQ(t.edge, "vision->llm");
  EXPECT_EQ(t.side, events::Side::Send);
  EXPECT_EQ(t.iteration, 1);
  EXPECT_EQ(t.microbatch, 2);
  const std::string checkJson = nan.runPath + ".check.json";
  CliResult check = runCli({"check", nan.runPath, "--json", checkJson});
  EXPECT_NE(check.exitCode, 0) << check.output;
  std::ifstream cin(checkJson);
  nlohmann::json checked = nlohmann::json::parse(cin);
  bool found = false;
  for (const auto& c : checked["checks"]) {
    if (c["name"] != "nonfinite") continue;
    ASSERT_FALSE(c["findings"].empty()) << c.dump(2);
    const auto& f = c["findings"][0];
    EXPECT_EQ(f.value("edge", ""), t.edge) << f.dump(2);
    EXPECT_EQ(f.value("rank", -1), t.rank) << f.dump(2);
    EXPECT_EQ(f.value("iteration", -1), t.iteration) << f.dump(2);
    EXPECT_EQ(f.value("microbatch", -1), t.microbatch) << f.dump(2);
    found = true;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace stagescope::testing
