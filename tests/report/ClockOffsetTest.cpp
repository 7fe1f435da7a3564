// Clock offsets are subtracted exactly once: by the reader (RunModel::clockOffsetsApplied),
// never again by the analysis or the trace export.  Rank 1's host clock runs 1 ms ahead of
// rank 0's; its raw times in the file are 1 ms late.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/report/ChromeTrace.h"
#include "core/analysis/Analysis.h"
#include "storage/RunFileWriter.h"
#include "storage/RunReader.h"

namespace stagescope::report {
namespace {

constexpr int64_t kOffset = 1'000'000;  // rank 1's clock minus rank 0's, ns

model::RunModel rawRun() {
  model::RunModel run;
  run.info.worldSize = 2;
  run.info.iterations = 1;
  run.info.level = events::RecordLevel::Meta;
  run.info.modules = {{"llm", "llm", 1, 1, 2, 1, 0, 2, {}}};
  run.ranks.resize(2);
  run.actions.resize(2);
  run.plan.resize(2);
  for (int r = 0; r < 2; ++r) {
    run.ranks[r].rank = r;
    run.ranks[r].module = "llm";
    run.ranks[r].pp = r;
    run.ranks[r].globalStage = r;
    run.ranks[r].totalStages = 2;
    events::ActionRecord a;
    a.rank = r;
    a.iteration = 0;
    a.seq = 0;
    a.kind = events::ActionKind::Forward;
    a.microbatch = 0;
    a.module = "llm";
    // On the common clock rank 0 runs [10, 20] us and rank 1 [20, 30] us.
    a.startNs = 10'000 * (r + 1) + (r ? kOffset : 0);
    a.endNs = a.startNs + 10'000;
    run.actions[r].push_back(a);
  }
  run.ranks[1].clockOffsetNs = kOffset;
  return run;
}

TEST(ClockOffsets, SubtractedOnceByTheReaderNeverAgain) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("stagescope_clock_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "offsets.db").string();
  std::filesystem::remove(path);
  storage::writeRunFile(rawRun(), path);
  const model::RunModel run = storage::loadRun(path);
  ASSERT_TRUE(run.clockOffsetsApplied);
  ASSERT_EQ(run.actions.size(), 2u);
  EXPECT_EQ(run.actions[1][0].startNs, 20'000);    // raw 1'020'000 minus the offset, once
  EXPECT_EQ(run.ranks[1].clockOffsetNs, kOffset);  // the offset itself stays visible

  // The analysis: the step spans both ranks on the common clock, 10..30 us.
  const auto tb = analysis::timeBreakdown(run);
  ASSERT_EQ(tb.stepMs.size(), 1u);
  EXPECT_DOUBLE_EQ(tb.stepMs[0], 0.020);

  // The trace: rank 1's slice starts 10 us after rank 0's.
  const std::string trace = (dir / "offsets.json").string();
  writeChromeTrace(run, trace);
  std::ifstream in(trace);
  std::stringstream ss;
  ss << in.rdbuf();
  double start[2] = {-1, -1};
  const auto json = nlohmann::json::parse(ss.str());
  for (const auto& e : json["traceEvents"])
    if (e["ph"] == "X") start[e["tid"].get<int>()] = e["ts"].get<double>();
  EXPECT_DOUBLE_EQ(start[0], 0.0);
  EXPECT_DOUBLE_EQ(start[1], 10.0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stagescope::report
