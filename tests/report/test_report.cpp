// The report writers over in-memory fixtures (see Fixture.h): the Chrome trace, progress lines, and
// check/compare/export through a real run file (storage writer, merge, reader).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "Fixture.h"
#include "app/report/CheckReport.h"
#include "app/report/ChromeTrace.h"
#include "app/report/CompareReport.h"
#include "app/report/Escape.h"
#include "app/report/Progress.h"
#include "core/analysis/Analysis.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"

namespace fs = std::filesystem;
using namespace stagescope;
using namespace stagescope::report;
using namespace stagescope::analysis;
using namespace stagescope::report::testing;  // the fixture and its helpers (Fixture.h)

// ---- export -----------------------------------------------------------------------------------

TEST(ChromeTrace, ParsesAndPairsFlows) {
  auto run = makeRun({.tp = 2, .pp = 3, .dp = 1, .microbatches = 4});
  run.diagnoses.push_back(
      {1, events::DiagnosisKind::FaultInjected, 0, 3, -1, "dropped one \"message\"", 0, ""});
  auto path = tempPath("trace.json");
  auto st = writeChromeTrace(run, path);
  auto j = nlohmann::json::parse(readFile(path));
  ASSERT_TRUE(j.contains("traceEvents"));
  const auto& ev = j["traceEvents"];
  std::map<int64_t, int> starts, finishes;
  std::map<std::pair<int, int>, std::pair<double, double>> sliceRange;  // unused bound check
  size_t slices = 0, threadNames = 0, processNames = 0;
  std::set<int> tids;
  for (const auto& e : ev) {
    std::string ph = e["ph"];
    if (ph == "X") {
      ++slices;
      tids.insert(e["tid"].get<int>());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    } else if (ph == "s") {
      starts[e["id"].get<int64_t>()] = e["tid"].get<int>();
    } else if (ph == "f") {
      finishes[e["id"].get<int64_t>()] = e["tid"].get<int>();
      EXPECT_EQ(e["bp"], "e");
    } else if (ph == "M") {
      if (e["name"] == "thread_name") {
        ++threadNames;
        std::string n = e["args"]["name"];
        EXPECT_NE(n.find("tp"), std::string::npos);
        EXPECT_NE(n.find("pp"), std::string::npos);
        EXPECT_NE(n.find("dp"), std::string::npos);
      }
      if (e["name"] == "process_name") ++processNames;
    }
  }
  size_t messages = run.transfers.size() / 2;
  EXPECT_EQ(starts.size(), messages);
  EXPECT_EQ(finishes.size(), messages);
  EXPECT_EQ(st.flows, messages);
  for (const auto& [id, tid] : starts) {
    ASSERT_TRUE(finishes.count(id));
    EXPECT_NE(finishes[id], tid);  // arrows go from one rank to another
  }
  EXPECT_EQ(threadNames, 6u);
  EXPECT_EQ(processNames, 1u);
  EXPECT_EQ(tids.size(), 6u);
  size_t actions = 0;
  for (const auto& l : run.actions) actions += l.size();
  EXPECT_EQ(slices, actions);  // transfers are async slices ("b"/"e"), not on rank tracks
  EXPECT_EQ(j["otherData"]["run_id"], run.info.runId);
}

// ---- misc -------------------------------------------------------------------------------------

TEST(Progress, PlainLinesWhenNotATty) {
  auto path = tempPath("progress.txt");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  {
    Progress p("loading", 1000, f, 0);
    for (int i = 0; i <= 1000; ++i) p.update(static_cast<uint64_t>(i));
    p.finish();
  }
  std::fclose(f);
  std::string s = readFile(path);
  EXPECT_NE(s.find("loading: 50% (500/1000, "), std::string::npos) << s;  // then rate, time left
  EXPECT_NE(s.find("s left)"), std::string::npos) << s;
  EXPECT_NE(s.find("loading: done in"), std::string::npos) << s;
  EXPECT_EQ(s.find('\r'), std::string::npos);
  int lines = 0;
  for (char ch : s) lines += ch == '\n';
  EXPECT_EQ(lines, 12);  // 0%, 10%, ..., 100%, done
}

// On a terminal: one redrawn line with N/total, the rate and the time left.
TEST(Progress, BarSaysHowManyHowFastAndHowLongOnATty) {
  auto path = tempPath("progress-tty.txt");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  {
    Progress p("merging 4 shards", 4, f, 1);
    p.update(1);
    p.finish();
  }
  std::fclose(f);
  const std::string s = readFile(path);
  EXPECT_EQ(s.rfind("\rmerging 4 shards [", 0), 0u) << s;
  EXPECT_NE(s.find(" 1/4, "), std::string::npos) << s;
  EXPECT_NE(s.find("/s, "), std::string::npos) << s;
  EXPECT_NE(s.find(" s left"), std::string::npos) << s;
  EXPECT_NE(s.find("100% 4/4"), std::string::npos) << s;  // the final line: no time left
  EXPECT_EQ(s.back(), '\n');
}

// ---- through a real run file (storage writer, merge, reader) ----------------------------------

namespace {
// Records a fixture run the way the engine does: one shard per rank, then merge.
std::string writeRunFile(const model::RunModel& run, const std::string& name) {
  std::string path = tempPath(name);
  fs::remove(path);
  for (const auto& p : storage::findShards(path)) fs::remove(p);
  auto info = run.info;
  info.status = events::RunStatus::Running;
  storage::createRunFile(path, info);
  std::vector<std::string> shards;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    int rank = static_cast<int>(r);
    shards.push_back(storage::shardPathFor(path, rank));
    auto w = storage::ShardWriter::open(shards.back(), run.info.level, rank);
    w->rank(run.ranks[r]);
    for (const auto& a : run.plan[r]) w->planned(a);
    for (const auto& a : run.actions[r]) w->action(a);
    for (const auto& t : run.transfers) {
      if (t.rank == rank) w->transfer(t);
    }
    for (const auto& g : run.gradients) {
      if (g.rank == rank) w->gradient(g);
    }
    for (const auto& l : run.losses) {
      if (l.rank == rank) w->loss(l);
    }
    for (const auto& d : run.diagnoses) {
      if (d.rank == rank) w->diagnosis(d);
    }
    if (rank == 0) {  // the reference travels with rank 0's shard, into its own tables
      for (const auto& g : run.referenceGradients) w->referenceGradient(g);
      for (const auto& l : run.referenceLosses) w->referenceLoss(l);
    }
    w->close();
    EXPECT_EQ(w->error(), "");
  }
  auto merged = storage::mergeShards(path, shards);
  EXPECT_TRUE(merged.ok());
  storage::updateRunStatus(path, run.info.status, run.info.statusReason, 0);
  return path;
}
}  // namespace

TEST(RunFile, CheckCompareExportThroughTheReader) {
  auto mem = makeRun({.tp = 2, .pp = 2, .dp = 1, .microbatches = 4, .iterations = 2});
  auto path = writeRunFile(mem, "clean.db");
  auto run = storage::loadRun(path);
  ASSERT_EQ(run.transfers.size(), mem.transfers.size());
  auto rep = checkRun(run);
  EXPECT_EQ(rep.exitCode, 0) << renderCheckText(rep);
  auto c = compareRuns(run, mem);
  EXPECT_EQ(c.verdict, Verdict::Identical) << c.verdictReason;
  auto st = writeChromeTrace(run, tempPath("file_trace.json"));
  EXPECT_EQ(st.flows, mem.transfers.size() / 2);

  // A corrupted receive recorded into the file is found after the round trip.
  auto bad = mem;
  int64_t i =
      findTransfer(bad, "llm:pp0->pp1", events::Direction::Activation, 1, 2, events::Side::Recv);
  ASSERT_GE(i, 0);
  bad.transfers[i].checksum ^= 0xff;
  auto badRun = storage::loadRun(writeRunFile(bad, "corrupt.db"));
  auto rep2 = checkRun(badRun);
  EXPECT_EQ(rep2.exitCode, exit_code::kChecksumMismatch) << renderCheckText(rep2);
  const auto* f = firstOf(rep2, "checksum_mismatch");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->iteration, 1);
  EXPECT_EQ(f->microbatch, 2);
}

// `compare` loads only the gradients it judges (storage::LoadOptions::comparedGradients:
// reduced and initial ones with payloads, accumulated ones without, no parameters after the
// step); the viewer compares whole models.  Both must give the same comparison, report for
// report, also for two layouts (TP shards gathered) and when the per-microbatch gradients carry
// another dtype than the reduced ones (the tolerance rule follows the reduced gradients in both).
TEST(RunFile, CompareOfReducedGradientsOnlyIsTheWholeRunsComparison) {
  auto withAccumulated = [](model::RunModel run) {
    std::vector<events::GradientRecord> acc;
    for (const auto& g : run.gradients) {
      if (g.phase != events::GradPhase::Reduced) continue;
      for (int mb = 0; mb < run.info.microbatches; ++mb) {
        events::GradientRecord x = g;
        x.phase = events::GradPhase::Accumulated;
        x.microbatch = mb;
        x.norm = g.norm * (mb + 1) / run.info.microbatches;
        x.dtype = "bfloat16";
        x.checksum = g.checksum + static_cast<uint64_t>(mb) + 1;
        acc.push_back(x);
      }
      events::GradientRecord after = g;  // not read by `compare`
      after.phase = events::GradPhase::ParamAfterStep;
      acc.push_back(after);
    }
    run.gradients.insert(run.gradients.end(), acc.begin(), acc.end());
    return run;
  };
  const auto a = writeRunFile(withAccumulated(makeRun({.tp = 2, .pp = 2, .iterations = 2})),
                              "reduced-only-a.db");
  const auto b = writeRunFile(withAccumulated(makeRun({.tp = 1, .pp = 2, .iterations = 2})),
                              "reduced-only-b.db");
  storage::LoadOptions whole;
  whole.payloads = true;
  storage::LoadOptions reduced = whole;
  reduced.comparedGradients = true;
  const auto wa = storage::loadRun(a, whole), wb = storage::loadRun(b, whole);
  const auto ra = storage::loadRun(a, reduced), rb = storage::loadRun(b, reduced);
  ASSERT_LT(ra.gradients.size(), wa.gradients.size());
  ASSERT_GT(ra.gradientsNotLoaded, 0u);
  for (const auto& [x, y] : {std::pair{&wa, &wb}, std::pair{&wb, &wa}}) {
    const auto& rx = x == &wa ? ra : rb;
    const auto& ry = y == &wa ? ra : rb;
    const Comparison cw = compareRuns(*x, *y), cr = compareRuns(rx, ry);
    EXPECT_EQ(renderMarkdown(cw), renderMarkdown(cr));
    EXPECT_EQ(renderJson(cw), renderJson(cr));
    EXPECT_EQ(renderHtml(cw), renderHtml(cr));
    EXPECT_EQ(cw.toleranceRule, toleranceFor("float32").describe());
    EXPECT_GT(cw.gradsCompared, 0u);
  }
}
