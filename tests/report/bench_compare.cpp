// Benchmark (not a test): compareRuns + the three writers on two runs of >= 1,000,000 events
// each (TP2 x PP4 x DP4, 16 microbatches, different seeds so every message differs).
// Usage: bench_compare [events=1000000] [outdir=.]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "Fixture.h"
#include "app/report/CheckReport.h"
#include "app/report/ChromeTrace.h"
#include "app/report/CompareReport.h"

using namespace stagescope;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

static size_t eventCount(const model::RunModel& r) {
  size_t n = r.transfers.size() + r.gradients.size() + r.losses.size();
  for (const auto& a : r.actions) n += a.size();
  return n;
}

int main(int argc, char** argv) {
  size_t target = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  std::string out = argc > 2 ? argv[2] : ".";
  report::testing::FixtureOptions o{.tp = 2, .pp = 4, .dp = 4, .microbatches = 16};
  o.iterations = 1;
  size_t perIteration = eventCount(report::testing::makeRun(o));
  o.iterations = static_cast<int>((target + perIteration - 1) / perIteration);
  auto t = Clock::now();
  auto a = report::testing::makeRun(o);
  o.seed = 2;
  auto b = report::testing::makeRun(o);
  std::printf("fixture: 2 runs x %zu events (%d iterations, 32 ranks) built in %.2fs\n",
              eventCount(a), o.iterations, since(t));

  t = Clock::now();
  auto c = analysis::compareRuns(a, b);
  double tCompare = since(t);
  t = Clock::now();
  report::writeHtml(c, out + "/bench_compare.html");
  report::writeMarkdown(c, out + "/bench_compare.md");
  report::writeJson(c, out + "/bench_compare.json");
  double tWrite = since(t);
  std::printf("compare: %.3fs (verdict %s, %zu messages compared), writers: %.3fs, total %.3fs\n",
              tCompare, analysis::toString(c.verdict), c.transfersCompared, tWrite,
              tCompare + tWrite);

  t = Clock::now();
  auto rep = analysis::checkRun(a);
  std::printf("check: %.3fs (exit %d)\n", since(t), rep.exitCode);
  t = Clock::now();
  auto st = report::writeChromeTrace(a, out + "/bench_trace.json");
  std::printf("export: %.3fs (%zu slices, %zu transfer slices, %zu flows)\n", since(t), st.slices,
              st.transfers, st.flows);
  return tCompare + tWrite < 5.0 ? 0 : 1;
}
