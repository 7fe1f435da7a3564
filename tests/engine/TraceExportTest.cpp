// `export --chrome-trace` of real runs (all ranks as processes over Gloo): every rank track's
// slices nest, every transfer is an async slice, every send/recv pair has an arrow from
// inside the send's action to inside the receive's action that does not point backwards.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "RunHarness.h"
#include "TraceCheck.h"
#include "app/report/ChromeTrace.h"
#include "storage/RunReader.h"

namespace stagescope::testing {
namespace {

class TraceExport : public ::testing::TestWithParam<const char*> {};

TEST_P(TraceExport, NestedSlicesAndForwardArrows) {
  const std::string config = GetParam();
  const RunOutput out =
      runStagescope(assetConfig(config), {"--set", "iterations=1"}, "trace_" + config);
  ASSERT_EQ(out.exitCode, 0) << out.output;
  const model::RunModel run = storage::loadRun(out.runPath);
  const std::string path = out.runPath + ".trace.json";
  const auto st = report::writeChromeTrace(run, path);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  TraceCounts counts;
  const auto problems = traceProblems(nlohmann::json::parse(ss.str()), &counts);
  for (size_t i = 0; i < problems.size() && i < 20; ++i) ADD_FAILURE() << problems[i];
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems";
  size_t complete = 0;
  for (const auto& p : run.pairs) complete += p.complete();
  EXPECT_GT(complete, 0u);
  EXPECT_EQ(st.flows, complete);
  EXPECT_EQ(st.flowsSkipped, 0u);
  EXPECT_EQ(counts.asyncSlices, run.transfers.size());
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Configs, TraceExport, ::testing::Values("fan_in", "llm_pp4"));

}  // namespace
}  // namespace stagescope::testing
