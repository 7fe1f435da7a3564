// The viewer's ImGui-free logic: causal replay order, stored activations, visible-range search
// and folding, row order, run problems, compare (core/analysis), find.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/analysis/Compare.h"
#include "core/analysis/HangGraph.h"
#include "core/analysis/Pairing.h"
#include "core/analysis/RecordFilter.h"
#include "core/model/Pairing.h"
#include "ui/FindFilter.h"
#include "ui/Formatting.h"
#include "ui/IterationLines.h"
#include "ui/LoadedRun.h"
#include "ui/RankRows.h"
#include "ui/ReplayOrder.h"
#include "ui/RunComparison.h"
#include "ui/RunProblems.h"
#include "ui/TimeIndex.h"

#include "storage/RunFileWriter.h"
#include "storage/RunReader.h"
#include "tests/support/SyntheticRun.h"

namespace stagescope::ui {
namespace {

using events::ActionKind;
using namespace stagescope::testing;

TEST(ReplayOrder, RespectsCausalityUnderClockSkew) {
  SyntheticSpec spec = defaultSyntheticSpec();
  spec.clockSkewNs.assign(10, 0);
  for (int r = 4; r < 10; ++r) spec.clockSkewNs[r] = -30'000'000;  // llm ranks 30 ms behind
  model::RunModel model = makeSyntheticRun(spec);
  auto pairs = pairActions(model);
  // The skew must actually invert timestamps somewhere, or the test proves nothing.
  size_t inverted = 0;
  for (const auto& p : pairs) {
    ASSERT_GE(p.sendAction, 0);
    ASSERT_GE(p.recvAction, 0);
    if (model.actions[p.recvRank][p.recvAction].endNs <
        model.actions[p.sendRank][p.sendAction].startNs)
      ++inverted;
  }
  ASSERT_GT(inverted, 10u);

  ReplayOrder order = ReplayOrder::build(model, pairs);
  EXPECT_EQ(order.brokenConstraints(), 0u);
  size_t total = 0;
  for (const auto& a : model.actions) total += 2 * a.size();
  ASSERT_EQ(order.size(), total);
  // Each rank's own order: begin(i) < end(i) < begin(i+1).
  for (size_t r = 0; r < model.actions.size(); ++r) {
    int64_t prev = -1;
    for (size_t i = 0; i < model.actions[r].size(); ++i) {
      int64_t b = order.positionOf(static_cast<int>(r), static_cast<int32_t>(i), false);
      int64_t e = order.positionOf(static_cast<int>(r), static_cast<int32_t>(i), true);
      EXPECT_LT(prev, b);
      EXPECT_LT(b, e);
      prev = e;
    }
  }
  // Every receive ends after its send began.
  for (const auto& p : pairs)
    EXPECT_LT(order.positionOf(p.sendRank, p.sendAction, false),
              order.positionOf(p.recvRank, p.recvAction, true));
}

TEST(ReplayOrder, StoredActivationsFollow1F1B) {
  model::RunModel model = makeSyntheticRun(defaultSyntheticSpec());
  ReplayOrder order = ReplayOrder::build(model, pairActions(model));
  const int m = model.info.microbatches;
  for (const auto& ri : model.ranks) {
    int peak = 0;
    for (int64_t s = 0; s <= static_cast<int64_t>(order.size()); s += 1) {
      int stored = order.storedActivations(ri.rank, s);
      ASSERT_GE(stored, 0);
      peak = std::max(peak, stored);
    }
    EXPECT_EQ(peak, std::min(ri.warmup + 1, m)) << "rank " << ri.rank;
    EXPECT_EQ(order.storedActivations(ri.rank, static_cast<int64_t>(order.size())), 0);
  }
  // Values at a specific point: after the first iteration's first forward of rank 0 ends.
  int64_t afterF0 = order.positionOf(0, 0, true) + 1;
  EXPECT_EQ(order.storedActivations(0, afterF0), 1);
  EXPECT_EQ(order.stateAt(0, afterF0).done, 1);
  EXPECT_FALSE(order.stateAt(0, afterF0).running);
  EXPECT_TRUE(order.stateAt(0, afterF0 - 1).running);
  // Navigation: iteration starts are increasing and the second one begins iteration 1.
  int64_t it1 = order.nextIteration(0);
  ASSERT_LT(it1, static_cast<int64_t>(order.size()));
  const auto& st = order.steps()[it1];
  EXPECT_EQ(model.actions[st.rank][st.action].iteration, 1);
  EXPECT_GT(order.nextMicrobatch(0), 0);
}

std::vector<events::ActionRecord> evenly(int n, int64_t width, int64_t gap) {
  std::vector<events::ActionRecord> v(n);
  for (int i = 0; i < n; ++i) {
    v[i].startNs = i * (width + gap);
    v[i].endNs = v[i].startNs + width;
  }
  return v;
}

TEST(TimeIndex, VisibleRangeBinarySearch) {
  auto v = evenly(100, 10, 5);  // [0,10) [15,25) [30,40) ...
  IndexRange r = visibleRange(v, 12, 31);
  EXPECT_EQ(r.first, 1u);       // [15,25) is the first ending after 12
  EXPECT_EQ(r.last, 3u);        // [30,40) starts before 31
  r = visibleRange(v, 10, 15);  // the gap only
  EXPECT_EQ(r.size(), 0u);
  r = visibleRange(v, -100, 1'000'000);
  EXPECT_EQ(r.first, 0u);
  EXPECT_EQ(r.last, 100u);
  // Against brute force on random windows.
  for (int64_t t0 = -20; t0 < 1600; t0 += 37) {
    for (int64_t len = 1; len < 400; len += 53) {
      IndexRange q = visibleRange(v, t0, t0 + len);
      size_t first = 0, last = 0;
      bool any = false;
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i].endNs > t0 && v[i].startNs < t0 + len) {
          if (!any) first = i;
          last = i + 1;
          any = true;
        }
      }
      if (any) {
        EXPECT_EQ(q.first, first);
        EXPECT_EQ(q.last, last);
      } else {
        EXPECT_EQ(q.size(), 0u);
      }
    }
  }
  EXPECT_EQ(itemAt(v, 17, 0), 1);
  EXPECT_EQ(itemAt(v, 12, 4), 0);  // 2 ns from [0,10), 3 ns from [15,25)
}

TEST(TimeIndex, FoldingCoversEverythingWithFewItems) {
  auto v = evenly(100000, 10, 5);
  const double nsPerPx = 1500000.0 / 1000;  // 1000 px wide view of everything
  std::vector<DrawItem> out;
  foldRange(timeColumns(v), visibleRange(v, 0, 1500000), nsPerPx, 3, out);
  ASSERT_FALSE(out.empty());
  EXPECT_LE(out.size(), 400u);  // at most one per 3 px
  EXPECT_EQ(out.front().first, 0u);
  EXPECT_EQ(out.back().last, v.size());
  for (size_t i = 1; i < out.size(); ++i) EXPECT_EQ(out[i].first, out[i - 1].last);
  // Zoomed in, wide items are not folded.
  out.clear();
  foldRange(timeColumns(v), visibleRange(v, 0, 150), 0.1, 3, out);
  EXPECT_EQ(out.size(), 10u);
  for (const auto& d : out) EXPECT_FALSE(d.folded());
}

// Zoomed out over a dense row, folds stay a few pixels wide and carry how busy their stretch
// was, so a bubble (a stretch at a lower duty cycle) is visible instead of one long bar.
TEST(TimeIndex, DenseRowFoldsIntoNarrowCellsThatShowTheBubbles) {
  std::vector<events::ActionRecord> v;
  int64_t t = 0;
  for (int i = 0; i < 200000;
       ++i) {  // first half busy 2/3 (10 on, 5 off); then 1/3 (10 on, 20 off)
    events::ActionRecord a;
    a.startNs = t;
    a.endNs = t + 10;
    t += i < 100000 ? 15 : 30;
    v.push_back(a);
  }
  const int64_t half = v[100000].startNs;
  const double nsPerPx = static_cast<double>(t) / 1000;  // everything in 1000 px
  std::vector<DrawItem> out;
  foldRange(timeColumns(v), visibleRange(v, 0, t), nsPerPx, 3, out, 4);
  ASSERT_GE(out.size(), 150u);  // not one bar: about 1000 px / 4 px
  EXPECT_LE(out.size(), 400u);
  for (size_t i = 1; i < out.size(); ++i) EXPECT_EQ(out[i].first, out[i - 1].last);
  EXPECT_EQ(out.back().last, v.size());
  for (const auto& d : out) {
    EXPECT_LE(static_cast<double>(d.endNs - d.startNs), 5 * nsPerPx);
    if (d.endNs < half) {
      EXPECT_NEAR(d.busy, 2.0 / 3, 0.05);
    } else if (d.startNs > half) {
      EXPECT_NEAR(d.busy, 1.0 / 3, 0.05);
    }
  }
}

// Zoomed out, a row is one busy share per pixel column, equal to the brute-force overlap of
// the actions with that column: a bubble (idle stretch) reads 0, a busy stretch its duty cycle.
TEST(TimeIndex, BusyPerColumnIsTheOverlapOfEachPixelColumn) {
  std::vector<events::ActionRecord> v;
  int64_t t = 0;
  for (int i = 0; i < 30000; ++i) {  // 10 on, 5 off; a 50,000 ns bubble after item 10,000
    events::ActionRecord a;
    a.startNs = t;
    a.endNs = t + 10;
    t += i == 9999 ? 50000 : 15;
    v.push_back(a);
  }
  const TimeColumns cols = timeColumns(v);
  const int columns = 997;
  const double nsPerPx = static_cast<double>(t) / columns;
  std::vector<float> busy;
  busyPerColumn(cols, 0, nsPerPx, columns, busy);
  ASSERT_EQ(busy.size(), static_cast<size_t>(columns));
  int idle = 0;
  for (int c = 0; c < columns; ++c) {
    const int64_t c0 = static_cast<int64_t>(nsPerPx * c),
                  c1 = static_cast<int64_t>(nsPerPx * (c + 1));
    int64_t inside = 0;
    for (const auto& a : v)
      inside += std::max<int64_t>(0, std::min(a.endNs, c1) - std::max(a.startNs, c0));
    EXPECT_NEAR(busy[c], static_cast<double>(inside) / static_cast<double>(c1 - c0), 1e-3) << c;
    idle += busy[c] == 0.0f;
  }
  // The bubble is ~50,000 ns of ~500,000: about a tenth of the columns, fully idle.
  EXPECT_GE(idle, columns / 12);
  EXPECT_LE(idle, columns / 8);
  EXPECT_EQ(busyBefore(cols, 0), 0);
  EXPECT_EQ(busyBefore(cols, 5), 5);
  EXPECT_EQ(busyBefore(cols, 12), 10);
  EXPECT_EQ(busyBefore(cols, t + 100), cols.busyPrefixNs.back());
}

// Iteration lines are drawn while the iterations in view are at least 4 px apart on average:
// 186 iterations (a 10^6-event run) across 1,400 px keep theirs, 1,860 (10^7) do not.
TEST(IterationLines, DrawnOnlyWhileTheyAreFarEnoughApart) {
  EXPECT_TRUE(drawsIterationLines(0, 1400));
  EXPECT_TRUE(drawsIterationLines(1, 2));
  EXPECT_TRUE(drawsIterationLines(186, 1400));
  EXPECT_FALSE(drawsIterationLines(1860, 1400));
  EXPECT_TRUE(drawsIterationLines(100, 400));   // exactly 4 px apart
  EXPECT_FALSE(drawsIterationLines(101, 400));  // closer
  EXPECT_FALSE(drawsIterationLines(2, 0));      // no room at all
}

TEST(RankRows, GroupedByModuleThenGrid) {
  model::RunModel model = makeSyntheticRun(defaultSyntheticSpec());
  auto rows = orderRankRows(model);
  ASSERT_EQ(rows.size(), 10u);
  // vision (tp1 pp2 dp2 @0): dp0 pp0, dp0 pp1, dp1 pp0, dp1 pp1 = ranks 0,1,2,3.
  std::vector<int> expect = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].rank, expect[i]);
  EXPECT_TRUE(rows[0].firstOfModule);
  EXPECT_TRUE(rows[4].firstOfModule);
  EXPECT_FALSE(rows[5].firstOfModule);
  EXPECT_EQ(rows[5].label, "llm  tp1 pp0 dp0  r5");
  // A model listing the llm first still puts the encoder (earlier global stage) first.
  std::swap(model.info.modules[0], model.info.modules[1]);
  rows = orderRankRows(model);
  EXPECT_EQ(model.ranks[rows[0].rank].module, "vision");
}

// The viewer's compare is analysis::compareRuns: the same verdict and the same first
// divergent message as `stagescope compare` (tests/debug runs the real pair).
TEST(ViewerCompare, SameMathematicsAcrossLayoutsDoesNotDiverge) {
  auto a = indexRun(makeSyntheticRun(defaultSyntheticSpec()));
  auto b = indexRun(makeSyntheticRun(alternateLayoutSpec()));  // llm tp2 -> tp1: other ranks
  ASSERT_NE(a->model.ranks.size(), b->model.ranks.size());
  auto c = compareForViewer(*a, *b);
  EXPECT_NE(c->verdict, analysis::Verdict::Diverged) << c->verdictReason;
  EXPECT_FALSE(c->first.has_value()) << c->firstText;
  EXPECT_EQ(firstDivergentTransfer(*c), -1);
}

TEST(ViewerCompare, NamesTheSameFirstDivergenceAsTheCli) {
  auto a = indexRun(makeSyntheticRun(defaultSyntheticSpec()));
  SyntheticSpec spec = alternateLayoutSpec();
  spec.divergeIteration = 1;
  spec.divergeMicrobatch = 2;
  auto b = indexRun(makeSyntheticRun(spec));
  auto viewer = compareForViewer(*a, *b);
  analysis::Comparison cli = analysis::compareRuns(a->model, b->model);
  EXPECT_EQ(viewer->verdict, analysis::Verdict::Diverged);
  EXPECT_EQ(viewer->verdict, cli.verdict);
  ASSERT_TRUE(viewer->first && cli.first);
  EXPECT_EQ(viewer->first->key, cli.first->key);
  EXPECT_EQ(viewer->firstText, cli.firstText);
  EXPECT_EQ(viewer->first->iteration, 1);
  const int64_t t = firstDivergentTransfer(*viewer);
  ASSERT_GE(t, 0);
  EXPECT_EQ(a->model.transfers[t].edge, cli.first->edge);
}

// A run recorded with a record filter compares in the viewer exactly as in the CLI: both read
// the filter with analysis::recordFilterOf, so the iteration the filter skipped is "skipped",
// not "missing" (without the filter the pair would be INCOMPLETE).
model::RunModel recordedIterationZeroOnly() {
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());  // 2 iterations
  auto later = [](const auto& r) { return r.iteration >= 1; };
  for (auto& actions : m.actions) std::erase_if(actions, later);
  std::erase_if(m.transfers, later);
  std::erase_if(m.gradients, later);
  std::erase_if(m.losses, later);
  m.transferIds.resize(m.transfers.size());
  for (size_t i = 0; i < m.transferIds.size(); ++i) m.transferIds[i] = static_cast<int64_t>(i);
  buildPairs(m);
  m.info.recordFilter.iterations = {0};  // what the ranks' FilteringRecorder applied
  return m;
}

TEST(ViewerCompare, RecordFilterIsAppliedAsInTheCli) {
  auto a = indexRun(recordedIterationZeroOnly());
  auto b = indexRun(recordedIterationZeroOnly());
  const analysis::RecordFilter filter = analysis::recordFilterOf(a->model);
  ASSERT_EQ(filter.iterations, std::vector<int>{0}) << filter.describe();
  analysis::CompareOptions cliOpts;  // what `stagescope compare` passes
  cliOpts.filterA = filter;
  cliOpts.filterB = analysis::recordFilterOf(b->model);
  const analysis::Comparison cli = analysis::compareRuns(a->model, b->model, cliOpts);
  const analysis::Comparison unfiltered = analysis::compareRuns(a->model, b->model);
  ASSERT_EQ(unfiltered.verdict, analysis::Verdict::Incomplete) << unfiltered.verdictReason;
  EXPECT_EQ(cli.verdict, analysis::Verdict::Identical) << cli.verdictReason;
  auto viewer = compareForViewer(*a, *b);
  EXPECT_EQ(viewer->verdict, cli.verdict) << viewer->verdictReason;
  EXPECT_EQ(viewer->verdictReason, cli.verdictReason);
}

TEST(FindFilter, MismatchAndNaN) {
  SyntheticSpec spec = defaultSyntheticSpec();
  spec.corruptIteration = 0;
  spec.corruptMicrobatch = 3;
  spec.nanIteration = 1;
  spec.nanMicrobatch = 1;
  model::RunModel model = makeSyntheticRun(spec);
  FindQuery q;
  q.mismatch = true;
  size_t total = 0;
  auto hits = findItems(model, q, 1000, &total);
  ASSERT_GT(total, 0u);
  for (const auto& h : hits) {
    EXPECT_EQ(model.transfers[h.index].iteration, 0);
    EXPECT_EQ(model.transfers[h.index].microbatch, 3);
  }
  // A pair whose sides differ only in dtype is a mismatch, as check counts it (shape_mismatch):
  // the viewer's find ignored dtype.
  ASSERT_TRUE(model.pairs.front().ok());
  const int64_t recv = model.pairs.front().recv;
  model.transfers[recv].dtype = "bfloat16";
  model.pairs = model::pairTransfers(model.transfers);
  q = FindQuery{};
  q.mismatch = true;
  hits = findItems(model, q, 1000, &total);
  bool found = false;
  for (const auto& h : hits) found = found || h.index == recv;
  EXPECT_TRUE(found) << "a dtype-only disagreement is not found as a mismatch";
  q = FindQuery{};
  q.nanInf = true;
  hits = findItems(model, q, 1000, &total);
  ASSERT_GT(total, 0u);
  for (const auto& h : hits) EXPECT_EQ(model.transfers[h.index].microbatch, 1);
  q = FindQuery{};
  q.what = FindWhat::Actions;
  q.rank = 5;
  q.kind = static_cast<int>(ActionKind::Forward);
  hits = findItems(model, q, 1000, &total);
  EXPECT_EQ(total, static_cast<size_t>(spec.iterations * spec.microbatches));
}

TEST(RunFile, SyntheticRunRoundTripsThroughStorage) {
  auto dir = std::filesystem::temp_directory_path() / "stagescope_ui_logic";
  std::filesystem::create_directories(dir);
  std::string path = (dir / "roundtrip.db").string();
  std::filesystem::remove(path);  // this test's own file from an earlier run
  model::RunModel model = makeSyntheticRun(defaultSyntheticSpec());
  storage::writeRunFile(model, path);
  EXPECT_THROW(storage::writeRunFile(model, path), std::runtime_error);  // never overwrites
  auto run = openRun(path);
  ASSERT_EQ(run->model.actions.size(), model.actions.size());
  for (size_t r = 0; r < model.actions.size(); ++r)
    EXPECT_EQ(run->model.actions[r].size(), model.actions[r].size());
  EXPECT_EQ(run->model.transfers.size(), model.transfers.size());
  EXPECT_EQ(run->model.pairs.size(), model.pairs.size());
  EXPECT_EQ(run->replay.brokenConstraints(), 0u);
  EXPECT_EQ(analysis::compareRuns(model, run->model).verdict, analysis::Verdict::Identical);
}

int rankAt(const model::RunModel& m, const std::string& module, int tp, int pp, int dp) {
  for (const auto& r : m.ranks)
    if (r.module == module && r.tp == tp && r.pp == pp && r.dp == dp) return r.rank;
  return -1;
}

events::DiagnosisRecord record(int rank, const std::string& kind, int waitsOn) {
  events::DiagnosisRecord d;
  d.rank = rank;
  EXPECT_TRUE(events::parseDiagnosisKind(kind, &d.kind)) << kind;
  d.waitsOnRank = waitsOn;
  d.message = kind;
  return d;
}

RunProblems problemsOf(const model::RunModel& m) {
  auto run = indexRun(m);
  return run->problems;
}

TEST(RunProblems, CompletedRunHasNone) {
  RunProblems p = problemsOf(makeSyntheticRun(defaultSyntheticSpec()));
  for (const auto& r : p.ranks) EXPECT_EQ(r.fate, RankFate::Completed);
  EXPECT_FALSE(p.any());
  EXPECT_TRUE(p.waits.empty());
}

// A rank that skipped one planned action in the middle of its run (its later actions done) is
// stuck at that action: the first planned one never executed, found whether or not the plan
// comes in (iteration, seq) order.
TEST(RunProblems, StuckPlanIsTheFirstPlannedActionNeverExecuted) {
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  const int r = rankAt(m, "llm", 0, 1, 0);
  auto& done = m.actions[r];
  ASSERT_GT(done.size(), 10u);
  const events::ActionRecord skipped = done[done.size() / 2];
  done.erase(done.begin() + static_cast<std::ptrdiff_t>(done.size() / 2));
  auto planIndex = [&] {
    const auto& plan = m.plan[r];
    for (size_t i = 0; i < plan.size(); ++i)
      if (plan[i].iteration == skipped.iteration && plan[i].seq == skipped.seq)
        return static_cast<int32_t>(i);
    return int32_t{-1};
  };
  ASSERT_GT(planIndex(), 0);
  EXPECT_EQ(problemsOf(m).ranks[r].stuckPlan, planIndex());
  std::reverse(m.plan[r].begin(), m.plan[r].end());
  EXPECT_EQ(problemsOf(m).ranks[r].stuckPlan, planIndex());
}

TEST(RunProblems, KilledRankIsKilledAndTheRootOfTheWaits) {
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  const int killed = rankAt(m, "llm", 0, 1, 0), up = rankAt(m, "llm", 0, 0, 0);
  const int64_t span = m.maxTimeNs - m.minTimeNs;
  std::vector<int64_t> cut(m.ranks.size(), span * 55 / 100);
  cut[killed] = span * 40 / 100;
  endRunEarly(m, cut);
  m.info.status = events::RunStatus::Failed;
  m.diagnoses = {record(killed, "rank_killed", -1), record(up, "timeout", killed)};
  RunProblems p = problemsOf(m);
  EXPECT_EQ(p.ranks[killed].fate, RankFate::Killed);
  EXPECT_GE(p.ranks[killed].stuckPlan, 0);
  // The stuck action is the first planned one it never completed.
  EXPECT_EQ(p.ranks[killed].stuckPlan, static_cast<int32_t>(m.actions[killed].size()));
  EXPECT_EQ(p.ranks[up].fate, RankFate::Hung);
  EXPECT_EQ(p.ranks[up].waitsOnRank, killed);
  ASSERT_EQ(p.waits.size(), 1u);
  EXPECT_EQ(p.waits[0].rank, up);
  EXPECT_EQ(p.waits[0].waitsOn, killed);
  EXPECT_EQ(p.firstStuckRank, killed);
  // A rank that stopped without any record is unfinished: never "completed".
  const int silent = rankAt(m, "vision", 0, 0, 0);
  EXPECT_EQ(p.ranks[silent].fate, RankFate::Unfinished);
  EXPECT_FALSE(p.ranks[silent].why.empty());
}

// A rank killed by a signal leads, even where the survivors' own timeouts form a cycle that the
// wait-for graph reports first: they wait on each other because a rank is gone (before, the
// viewer's jump went to the cycle's lowest survivor).
TEST(RunProblems, AKilledRankLeadsEvenWhenTheSurvivorsWaitOnEachOther) {
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  const int killed = rankAt(m, "vision", 0, 0, 0), a = rankAt(m, "llm", 0, 1, 0),
            b = rankAt(m, "llm", 0, 2, 0);
  ASSERT_GE(killed, 0);
  const int64_t span = m.maxTimeNs - m.minTimeNs;
  std::vector<int64_t> cut(m.ranks.size(), span * 55 / 100);
  cut[killed] = span * 40 / 100;
  endRunEarly(m, cut);
  m.info.status = events::RunStatus::Failed;
  m.diagnoses = {record(a, "timeout", b), record(b, "timeout", a),
                 record(killed, "rank_killed", -1)};
  RunProblems p = problemsOf(m);
  EXPECT_EQ(p.ranks[killed].fate, RankFate::Killed);
  EXPECT_EQ(p.firstStuckRank, killed);
}

// The stuck inspector's "why": each rank gets the hang verdicts about it, root cause first (a
// cycle's members its cycle), and a bystander the run's root cause.  Two llm ranks wait on each
// other; a vision rank waits on the first of them.
TEST(RunProblems, EachStuckRankGetsTheVerdictsAboutIt) {
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  const int a = rankAt(m, "llm", 0, 1, 0), b = rankAt(m, "llm", 0, 2, 0);
  const int bystander = rankAt(m, "vision", 0, 1, 0), idle = rankAt(m, "vision", 0, 0, 0);
  const int64_t span = m.maxTimeNs - m.minTimeNs;
  endRunEarly(m, std::vector<int64_t>(m.ranks.size(), span / 2));
  m.info.status = events::RunStatus::Hung;
  m.diagnoses = {record(a, "timeout", b), record(b, "timeout", a), record(bystander, "timeout", a)};
  const RunProblems p = problemsOf(m);
  ASSERT_FALSE(p.hangVerdicts.empty());
  const std::string cycle = "cycle rank " + std::to_string(std::min(a, b));
  for (int r : {a, b}) {
    const auto causes = p.causesOf(r);
    EXPECT_TRUE(causes.own) << "rank " << r;
    bool named = false;
    for (const auto& line : causes.lines) named |= line.rfind(cycle, 0) == 0;
    EXPECT_TRUE(named) << "rank " << r << " is in the cycle";
  }
  // The bystander's wait is explained by the rank it waits on; a rank no verdict names gets the
  // run's root cause (the first verdict), never nothing.
  EXPECT_FALSE(p.causesOf(bystander).lines.empty());
  const auto ofIdle = p.causesOf(idle);
  EXPECT_FALSE(ofIdle.own);
  ASSERT_EQ(ofIdle.lines.size(), 1u);
  EXPECT_EQ(ofIdle.lines.front(), p.hangVerdicts.front().sentence);
}

// A killed rank is its own cause (its record), and the root cause a bystander is shown: not the
// wait-for graph's verdicts about the survivors ("rank 4 is the missing partner", in red under
// "the run's root cause" on the killed rank, before).
TEST(RunProblems, AKilledRankIsTheCauseTheBystandersAreShown) {
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  const int killed = rankAt(m, "llm", 0, 1, 0), a = rankAt(m, "llm", 0, 0, 0);
  const int bystander = rankAt(m, "vision", 0, 0, 0);
  const int64_t span = m.maxTimeNs - m.minTimeNs;
  std::vector<int64_t> cut(m.ranks.size(), span * 55 / 100);
  cut[killed] = span * 40 / 100;
  endRunEarly(m, cut);
  m.info.status = events::RunStatus::Failed;
  auto kill = record(killed, "rank_killed", -1);
  kill.message = "killed by signal 9 (Killed)";
  m.diagnoses = {kill, record(a, "timeout", bystander), record(bystander, "timeout", -1)};
  const RunProblems p = problemsOf(m);
  ASSERT_EQ(p.firstStuckRank, killed);
  const auto own = p.causesOf(killed);
  EXPECT_TRUE(own.own);
  ASSERT_EQ(own.lines.size(), 1u);
  EXPECT_EQ(own.lines.front(), p.ranks[killed].why);
  const auto other = p.causesOf(rankAt(m, "vision", 0, 1, 0));
  EXPECT_FALSE(other.own);
  ASSERT_EQ(other.lines.size(), 1u);
  EXPECT_EQ(other.lines.front().rfind("rank " + std::to_string(killed) + ": ", 0), 0u)
      << other.lines.front();
}

// A captured job whose own schedule differs from the plan (rank 2's warmup): that cause leads
// the jump (rank 2, not the wait-for graph's root, rank 1) and is the first line of rank 2's
// "why", and of a bystander's as the run's root cause; the graph's verdicts follow.
TEST(RunProblems, ACapturedJobsScheduleCauseLeadsItsWaits) {
  RunProblems p;
  p.ranks.resize(4);
  for (auto& r : p.ranks) r.fate = RankFate::Hung;
  p.ranks[3].fate = RankFate::Completed;
  analysis::HangVerdict cycle;
  cycle.aboutRank = 1;
  cycle.sentence = "cycle rank 1 -> rank 2 -> rank 1: each rank waits for the next";
  cycle.cycle = {1, 2};
  p.hangVerdicts = {cycle};
  p.firstStuckRank = 1;
  p.planConformance.causes = {
      {2, "audio stage 0 (rank 2): the job's warmup is 3 where the plan has 2", "", ""}};
  EXPECT_EQ(leadRank(p), 2);
  const auto of2 = p.causesOf(2);
  EXPECT_TRUE(of2.own);
  ASSERT_EQ(of2.lines.size(), 2u);
  EXPECT_EQ(of2.lines[0], p.planConformance.causes[0].line());
  EXPECT_EQ(of2.lines[1], cycle.sentence);
  const auto of0 = p.causesOf(0);
  EXPECT_FALSE(of0.own);
  ASSERT_EQ(of0.lines.size(), 1u);
  EXPECT_EQ(of0.lines[0], p.planConformance.causes[0].line());
  // A cause about a rank that completed does not take the jump from the graph's root.
  p.planConformance.causes[0].rank = 3;
  EXPECT_EQ(leadRank(p), 1);
  // A killed rank leads over both.
  p.ranks[0].fate = RankFate::Killed;
  p.firstStuckRank = 0;
  EXPECT_EQ(leadRank(p), 0);
}

// Two ranks killed: the one that ended first leads (the launcher's order of their ends, which
// the run's status reason names too), whatever their numbers (before: the lowest rank).
TEST(RunProblems, OfTwoKilledRanksTheOneThatEndedFirstLeads) {
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  const int low = rankAt(m, "llm", 0, 0, 0), high = rankAt(m, "llm", 0, 1, 0);
  ASSERT_LT(low, high);
  const int64_t span = m.maxTimeNs - m.minTimeNs;
  endRunEarly(m, std::vector<int64_t>(m.ranks.size(), span * 40 / 100));
  m.info.status = events::RunStatus::Failed;
  events::DiagnosisRecord first = record(high, "rank_killed", -1),
                          second = record(low, "rank_killed", -1);
  first.timeNs = m.minTimeNs + span / 2;
  second.timeNs = first.timeNs + 1000;
  m.diagnoses = {second, first};
  EXPECT_EQ(problemsOf(m).firstStuckRank, high);
  std::swap(m.diagnoses[0].timeNs, m.diagnoses[1].timeNs);
  EXPECT_EQ(problemsOf(m).firstStuckRank, low);
}

TEST(RunProblems, ARunThatWasInterruptedStopsItsUnfinishedRanks) {
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  endRunEarly(m, std::vector<int64_t>(m.ranks.size(), (m.maxTimeNs - m.minTimeNs) / 2));
  m.info.status = events::RunStatus::Killed;
  RunProblems p = problemsOf(m);
  for (const auto& r : p.ranks) EXPECT_EQ(r.fate, RankFate::Stopped);
}

// A run hung half-way; a, b, c: the llm's stage 1, 2 and 0 ranks (the waiters of the tests below).
struct HungRun {
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  int a = rankAt(m, "llm", 0, 1, 0), b = rankAt(m, "llm", 0, 2, 0), c = rankAt(m, "llm", 0, 0, 0);
  HungRun() {
    endRunEarly(m, std::vector<int64_t>(m.ranks.size(), (m.maxTimeNs - m.minTimeNs) / 2));
    m.info.status = events::RunStatus::Hung;
  }
};

TEST(RunProblems, TheRootOfAWaitCycleIsItsLowestRank) {
  HungRun h;
  auto& m = h.m;
  const int a = h.a, b = h.b, c = h.c;
  // c waits on a, a and b wait on each other.
  m.diagnoses = {record(b, "timeout", a), record(a, "timeout", b), record(c, "timeout", a)};
  RunProblems p = problemsOf(m);
  EXPECT_EQ(p.waits.size(), 3u);
  EXPECT_EQ(p.firstStuckRank, std::min(a, b));
  EXPECT_EQ(p.ranks[a].fate, RankFate::Hung);
  // a <-> b is the cycle (drawn as one, named on the edge leaving its lowest rank); c's wait on
  // a leads into it but is not part of it.
  const int low = std::min(a, b), high = std::max(a, b);
  for (const auto& w : p.waits) {
    EXPECT_EQ(w.inCycle, w.rank != c) << w.rank << " -> " << w.waitsOn;
    EXPECT_EQ(w.cycleLabel, w.rank == low ? "cycle r" + std::to_string(low) + " -> r" +
                                                std::to_string(high) + " -> r" + std::to_string(low)
                                          : "")
        << w.rank;
  }
}

// How long a rank was stuck ends when it gave up waiting (its waits row), which is after the
// run's last action: the hang's duration is the wait, not the gap to the last record.
TEST(RunProblems, AStuckRankIsStuckUntilItGaveUpWaiting) {
  HungRun h;
  auto& m = h.m;
  m.diagnoses = {record(h.a, "timeout", h.b)};
  events::WaitRecord w;
  w.rank = h.a;
  w.peer = h.b;
  w.timeNs = m.maxTimeNs + 3'000'000'000;  // gave up 3 s after the last recorded action
  m.waits.push_back(w);
  RunProblems p = problemsOf(m);
  EXPECT_EQ(p.ranks[h.a].stuckUntilNs, w.timeNs);
  EXPECT_EQ(p.ranks[h.c].stuckUntilNs, m.maxTimeNs);  // no record of its own: the run's end
}

// The wait-for edges come from the ranks' structured `waits` rows (analysis::waitForGraph, as
// the CLI's hang graph), never from diagnosis text: here the timeout diagnoses name no peer and
// their sentences name a wrong one.
events::WaitRecord waitRow(int rank, int peer, const std::string& edge) {
  events::WaitRecord w;
  w.rank = rank;
  w.peer = peer;
  w.edge = edge;
  w.direction = events::Direction::Gradient;
  w.microbatch = 1;
  w.timeoutSeconds = 5;
  return w;
}

TEST(RunProblems, WaitEdgesComeFromTheWaitsRows) {
  HungRun h;
  auto& m = h.m;
  const int a = h.a, b = h.b, c = h.c;
  m.diagnoses = {record(a, "timeout", -1), record(b, "timeout", -1), record(c, "timeout", -1)};
  for (auto& d : m.diagnoses) d.message = "rank " + std::to_string(d.rank) + " waits on rank 0";
  m.waits = {waitRow(a, b, "llm:pp1->pp2"), waitRow(b, a, "llm:pp1->pp2"),
             waitRow(c, a, "llm:pp0->pp1")};
  RunProblems p = problemsOf(m);
  ASSERT_EQ(p.waits.size(), 3u);
  for (const WaitEdge& w : p.waits) {
    const int expect = w.rank == a ? b : a;
    EXPECT_EQ(w.waitsOn, expect) << w.sentence;
    EXPECT_EQ(p.ranks[w.rank].waitsOnRank, expect);
    EXPECT_NE(w.sentence.find(w.rank == c ? "llm:pp0->pp1" : "llm:pp1->pp2"), std::string::npos)
        << w.sentence;
  }
  // The CLI's hang graph is the same function over the same rows.
  const analysis::WaitGraph cli = analysis::waitForGraph(m);
  ASSERT_EQ(cli.edges.size(), p.waits.size());
  for (size_t i = 0; i < cli.edges.size(); ++i)
    EXPECT_EQ(cli.edges[i].sentence(), p.waits[i].sentence);
  EXPECT_EQ(p.firstStuckRank, std::min(a, b));
}

// A receive that gave up on a message whose send is recorded was too short for it: the graph
// says so (the timeout, not "has not posted"), and the remedy is a longer timeout; a wait on a
// message never sent gets no such verdict.
TEST(RunProblems, AWaitOnAMessageAlreadySentIsATimeoutTooShort) {
  HungRun h;
  auto& m = h.m;
  const auto sent = std::find_if(m.transfers.begin(), m.transfers.end(), [](const auto& t) {
    return t.side == events::Side::Send && t.srcRank != t.dstRank && t.microbatch >= 0;
  });
  ASSERT_NE(sent, m.transfers.end());
  events::WaitRecord w = waitRow(sent->dstRank, sent->srcRank, sent->edge.str());
  w.op = events::WaitOp::Recv;
  w.iteration = sent->iteration;
  w.microbatch = sent->microbatch;
  w.direction = sent->direction;
  w.timeoutSeconds = 0.5;
  events::WaitRecord never = w;  // another rank's wait on a message nobody sent
  never.rank = sent->srcRank;
  never.peer = sent->dstRank;
  never.microbatch = 99;
  m.waits = {w, never};
  const analysis::WaitGraph g = analysis::waitForGraph(m);
  ASSERT_FALSE(g.verdicts.empty());
  EXPECT_EQ(g.verdicts.front().cause, analysis::HangCause::TimeoutTooShort) << g.verdict();
  EXPECT_EQ(g.verdicts.front().aboutRank, sent->dstRank);
  EXPECT_NE(g.headline().find("gave up after 0.5 s on"), std::string::npos) << g.headline();
  EXPECT_EQ(g.remedy().rfind("to change: raise the timeout (the waits gave up after 0.5 s)", 0), 0u)
      << g.remedy();
  EXPECT_EQ(
      std::count_if(g.verdicts.begin(), g.verdicts.end(),
                    [](const auto& v) { return v.cause == analysis::HangCause::TimeoutTooShort; }),
      1);
}

TEST(RunProblems, FirstNonFiniteIsCausallyFirstNotFirstByEdgeName) {
  // llm tp1: with tp2 the llm's TP peer receives the bridge activation by a TP broadcast, which
  // is not a recorded message, so no recorded event links it to the bridge (a limit of the
  // causal order over recorded messages).
  SyntheticSpec spec = alternateLayoutSpec();
  spec.nanIteration = 1;
  spec.nanMicrobatch = 2;
  model::RunModel m = makeSyntheticRun(spec);
  auto run = indexRun(m);
  const NonFinite& n = run->problems.firstNonFinite;
  ASSERT_EQ(n.kind, NonFinite::Kind::Transfer);
  const auto& t = run->model.transfers[n.index];
  // Every activation of (it1, mb2) carries the NaN: the first is where it entered the
  // pipeline, the vision encoder's first stage sending it on, not "llm:..." (first by name).
  EXPECT_EQ(t.edge, "vision:pp0->pp1");
  EXPECT_EQ(t.side, events::Side::Send);
  EXPECT_EQ(t.iteration, 1);
  EXPECT_EQ(t.microbatch, 2);
  // Find NaN/Inf lists in the same causal order; model order would start with "llm:".
  FindQuery q;
  q.what = FindWhat::Transfers;
  q.nanInf = true;
  auto causal = findItems(run->model, q, 10, nullptr, &run->replay);
  ASSERT_FALSE(causal.empty());
  EXPECT_EQ(causal.front().index, n.index);
  auto byModel = findItems(run->model, q, 10);
  ASSERT_FALSE(byModel.empty());
  EXPECT_EQ(run->model.transfers[byModel.front().index].edge.rfind("llm:", 0), 0u);
  // The loss of that microbatch is non-finite too, but later in causal order.
  auto all = nonFiniteInCausalOrder(run->model, run->replay);
  bool lossSeen = false;
  for (const auto& x : all) lossSeen |= x.kind == NonFinite::Kind::Loss;
  EXPECT_TRUE(lossSeen);
  EXPECT_EQ(all.front().index, n.index);
}

// The viewer's two phases: the timeline (storage::LoadOptions::timelineOnly) and the details
// (detailsOnly) read disjoint parts of the file; merged and judged, they are the whole run as
// one load reads it, record for record, verdicts included.
TEST(OpenRun, TimelineThenDetailsIsTheWholeRun) {
  auto dir = std::filesystem::temp_directory_path() / "stagescope_ui_logic";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "two_phases.db").string();
  std::filesystem::remove(path);  // this test's own file from an earlier run
  SyntheticSpec spec = defaultSyntheticSpec();
  spec.nanIteration = 1;
  spec.nanMicrobatch = 1;
  model::RunModel written = makeSyntheticRun(spec);
  endRunEarly(written, std::vector<int64_t>(written.ranks.size(),
                                            (written.maxTimeNs - written.minTimeNs) * 3 / 4));
  written.info.status = events::RunStatus::Hung;
  storage::writeRunFile(written, path);

  const model::RunModel whole = storage::loadRun(path);
  const auto wholeRun = indexRun(storage::loadRun(path));
  auto run = openTimeline(path);
  EXPECT_FALSE(run->detailsLoaded);
  EXPECT_EQ(run->fateOf(0), nullptr);  // no verdict before the details
  EXPECT_TRUE(run->model.plan.empty() || run->model.plan.front().empty());
  EXPECT_TRUE(run->model.gradients.empty());
  EXPECT_TRUE(run->model.losses.empty());
  // The timeline is whole already.
  ASSERT_EQ(run->model.actions.size(), whole.actions.size());
  for (size_t r = 0; r < whole.actions.size(); ++r)
    EXPECT_EQ(run->model.actions[r].size(), whole.actions[r].size());
  EXPECT_EQ(run->model.transfers.size(), whole.transfers.size());
  EXPECT_EQ(run->model.diagnoses.size(), whole.diagnoses.size());
  EXPECT_EQ(run->replay.size(), wholeRun->replay.size());

  model::RunModel details = loadDetails(*run);
  // The details read no timeline.
  for (const auto& a : details.actions) EXPECT_TRUE(a.empty());
  EXPECT_TRUE(details.transfers.empty());
  EXPECT_TRUE(details.ranks.empty());
  mergeDetails(*run, std::move(details));
  completeDetails(*run, judgeRun(*run));
  ASSERT_TRUE(run->detailsLoaded);

  const auto& m = run->model;
  ASSERT_EQ(m.plan.size(), whole.plan.size());
  for (size_t r = 0; r < whole.plan.size(); ++r) {
    ASSERT_EQ(m.plan[r].size(), whole.plan[r].size());
    for (size_t i = 0; i < whole.plan[r].size(); ++i) {
      EXPECT_EQ(m.plan[r][i].iteration, whole.plan[r][i].iteration);
      EXPECT_EQ(m.plan[r][i].seq, whole.plan[r][i].seq);
      EXPECT_EQ(m.plan[r][i].kind, whole.plan[r][i].kind);
    }
  }
  ASSERT_EQ(m.gradients.size(), whole.gradients.size());
  for (size_t i = 0; i < whole.gradients.size(); ++i) {
    EXPECT_EQ(m.gradients[i].param, whole.gradients[i].param);
    EXPECT_EQ(m.gradients[i].iteration, whole.gradients[i].iteration);
    EXPECT_EQ(m.gradients[i].phase, whole.gradients[i].phase);
    EXPECT_EQ(m.gradients[i].checksum, whole.gradients[i].checksum);
  }
  ASSERT_EQ(m.losses.size(), whole.losses.size());
  for (size_t i = 0; i < whole.losses.size(); ++i)
    EXPECT_EQ(std::isnan(m.losses[i].loss) ? 0 : m.losses[i].loss,
              std::isnan(whole.losses[i].loss) ? 0 : whole.losses[i].loss);
  EXPECT_EQ(m.referenceLosses.size(), whole.referenceLosses.size());
  EXPECT_EQ(m.referenceGradients.size(), whole.referenceGradients.size());
  EXPECT_EQ(m.inputs.size(), whole.inputs.size());
  // The verdicts are the whole run's.
  const RunProblems& p = run->problems;
  const RunProblems& q = wholeRun->problems;
  ASSERT_GT(q.nonFiniteRecords, 0u);
  ASSERT_GE(q.firstStuckRank, 0);
  EXPECT_EQ(p.nonFiniteRecords, q.nonFiniteRecords);
  EXPECT_EQ(p.firstNonFinite.kind, q.firstNonFinite.kind);
  EXPECT_EQ(p.firstNonFinite.index, q.firstNonFinite.index);
  EXPECT_EQ(p.firstStuckRank, q.firstStuckRank);
  ASSERT_EQ(p.ranks.size(), q.ranks.size());
  for (size_t r = 0; r < q.ranks.size(); ++r) {
    EXPECT_EQ(p.ranks[r].fate, q.ranks[r].fate) << "rank " << r;
    EXPECT_EQ(p.ranks[r].stuckPlan, q.ranks[r].stuckPlan) << "rank " << r;
  }
}

// A file replaced between the two phases (another run written to the same path) is not merged
// into the first one's timeline: one error naming the file and both runs.
// The viewer reads the timeline and the details of a run file at the same time, on two
// connections: details read from another run (here: another file, as if the file had been
// replaced between the two reads) are refused by the check the viewer makes before merging.
TEST(OpenRun, DetailsOfAnotherRunAreRefused) {
  auto dir = std::filesystem::temp_directory_path() / "stagescope_ui_logic";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "replaced.db").string();
  const std::string other = (dir / "replacement.db").string();
  for (const auto& p : {path, other}) std::filesystem::remove(p);  // this test's own files
  model::RunModel first = makeSyntheticRun(defaultSyntheticSpec());
  first.info.runId = "first-run";
  storage::writeRunFile(first, path);
  model::RunModel second = makeSyntheticRun(defaultSyntheticSpec());
  second.info.runId = "second-run";
  storage::writeRunFile(second, other);
  auto run = openTimeline(path);
  EXPECT_NO_THROW(checkSameRun(*run, readDetails(path)));  // the same run's details are taken
  try {
    checkSameRun(*run, readDetails(other));
    FAIL() << "the details of another run were accepted";
  } catch (const storage::RunFileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("changed while it loaded"), std::string::npos) << what;
    EXPECT_NE(what.find("second-run"), std::string::npos) << what;
  }
}

TEST(OpenRun, BadFilesGiveTypedErrors) {
  EXPECT_THROW(openRun("/nonexistent/run.db"), storage::RunFileError);
  auto p = std::filesystem::temp_directory_path() / "stagescope_not_a_run.db";
  {
    FILE* f = std::fopen(p.c_str(), "w");
    std::fputs("hello, not sqlite", f);
    std::fclose(f);
  }
  EXPECT_THROW(openRun(p.string()), storage::RunFileError);
}

}  // namespace
}  // namespace stagescope::ui

namespace stagescope::ui {
namespace {

using namespace stagescope::testing;

// Colocation: vision's last stage, audio and llm stage 0 share rank 1 (colocatedSyntheticSpec).
TEST(ColocatedView, ASharedRankIsOneRowWithALanePerModule) {
  const model::RunModel model = makeSyntheticRun(colocatedSyntheticSpec());
  const auto rows = orderRankRows(model);
  ASSERT_EQ(rows.size(), 4u);  // one row per rank, not per (rank, module)
  const auto rowOf = rowOfRank(rows, 4);
  ASSERT_GE(rowOf[1], 0);
  const RankRow& shared = rows[rowOf[1]];
  ASSERT_TRUE(shared.shared());
  ASSERT_EQ(shared.lanes.size(), 3u);
  EXPECT_EQ(shared.lanes[0].module, "vision");  // global stage 1, first in the config
  EXPECT_EQ(shared.lanes[1].module, "audio");   // global stage 1 (right-aligned)
  EXPECT_EQ(shared.lanes[2].module, "llm");     // global stage 2
  EXPECT_EQ(shared.lanes[2].label, "llm tp0 pp0 dp0");
  EXPECT_EQ(shared.lanes[2].moduleIndex, 2);
  EXPECT_EQ(shared.laneOf("llm"), 2);
  EXPECT_EQ(shared.laneOf(""), -1);  // rank-wide: across the row
  EXPECT_EQ(shared.label, "r1  vision+audio+llm");
  // A group of its own ("shared ranks"), after vision's (rank 0), before the llm's.
  EXPECT_EQ(rows[0].rank, 0);
  EXPECT_EQ(rows[1].rank, 1);
  EXPECT_TRUE(rows[1].firstOfModule);
  EXPECT_EQ(rows[2].rank, 2);
  EXPECT_TRUE(rows[2].firstOfModule);
  EXPECT_FALSE(rows[rowOf[0]].shared());
  EXPECT_EQ(rows[rowOf[0]].laneOf("vision"), -1);  // one module: the whole row
}

TEST(ColocatedView, ReplayStepsThroughEveryModuleOfASharedRankInPlanOrder) {
  const model::RunModel model = makeSyntheticRun(colocatedSyntheticSpec());
  const auto pairs = pairActions(model);
  const ReplayOrder order = ReplayOrder::build(model, pairs);
  EXPECT_EQ(order.brokenConstraints(), 0u);
  // Rank 1's steps, in replay order, visit its actions in plan order, all three modules'.
  std::vector<std::string> replayed;
  int32_t expect = 0;
  for (const ReplayStep& s : order.steps()) {
    if (s.rank != 1 || s.end) continue;
    EXPECT_EQ(s.action, expect++);
    replayed.push_back(model.actions[1][s.action].module);
  }
  ASSERT_EQ(replayed.size(), model.plan[1].size());
  for (size_t i = 0; i < replayed.size(); ++i) EXPECT_EQ(replayed[i], model.plan[1][i].module);
  EXPECT_EQ(std::set<std::string>(replayed.begin(), replayed.end()),
            (std::set<std::string>{"", "audio", "vision", "llm"}));
  // A local hand-off's receive ends after its send began, on the same rank.
  size_t local = 0;
  for (const auto& p : pairs) {
    if (p.sendRank != p.recvRank) continue;
    ++local;
    EXPECT_LT(order.positionOf(p.sendRank, p.sendAction, false),
              order.positionOf(p.recvRank, p.recvAction, true));
  }
  EXPECT_EQ(local, 2u * 2u * 4u * 2u);  // 2 edges x 2 directions x 4 mb x 2 iterations
}

TEST(ColocatedView, FindByModuleOnASharedRank) {
  const model::RunModel model = makeSyntheticRun(colocatedSyntheticSpec());
  FindQuery q;
  q.what = FindWhat::Actions;
  q.module = "audio";
  size_t total = 0;
  const auto hits = findItems(model, q, 100000, &total);
  size_t audio = 0, rankWide = 0;
  for (const auto& a : model.actions[1]) {
    audio += a.module == "audio";
    rankWide += a.module.empty();
  }
  ASSERT_GT(audio, 0u);
  EXPECT_EQ(total, audio + rankWide);  // its own actions and its rank's optimizer steps
  for (const auto& h : hits) {
    EXPECT_EQ(h.rank, 1);
    const auto& m = model.actions[1][h.index].module;
    EXPECT_TRUE(m == "audio" || m.empty()) << m;
  }
  // Transfers by module: the local hand-offs of audio->llm match "audio".
  q.what = FindWhat::Transfers;
  const auto th = findItems(model, q, 100000, &total);
  ASSERT_FALSE(th.empty());
  for (const auto& h : th)
    EXPECT_NE(model.transfers[h.index].edge.find("audio"), std::string::npos);
}

// An action or message of no microbatch (the optimizer step, an iteration's reductions) is
// labelled without one: the replay bar said "r0 ends OPT_STEP it1 mb-1".
TEST(Labels, NoMicrobatchIsNotWrittenAsMinusOne) {
  EXPECT_EQ(microbatchSuffix(-1), "");
  EXPECT_EQ(microbatchSuffix(0), " mb0");
  EXPECT_EQ(microbatchSuffix(12), " mb12");
}

}  // namespace
}  // namespace stagescope::ui
