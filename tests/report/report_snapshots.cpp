// Writes every report of a set of fixture cases into a folder, so that a change to the report
// writers (app/report) can be diffed against the output before it:
//   report_snapshots DIR   ->  DIR/<case>.md, .html, .json (compare), <case>.trace.json
//                              (export), <case>.check.txt, .check.json, .junit.xml (check)
// The cases cover each compare verdict (identical, within tolerance, diverged, incomplete),
// non-finite values, a colocated multimodule run, collectives and a diagnosis.  Everything is
// deterministic (fixed seeds), so two builds of the same writers give byte-identical files.
#include <cmath>
#include <cstdio>
#include <string>

#include "Fixture.h"
#include "app/report/CheckReport.h"
#include "app/report/ChromeTrace.h"
#include "app/report/CompareReport.h"
#include "storage/TextFile.h"
#include "tests/support/SyntheticRun.h"

namespace {

using namespace stagescope;
using report::testing::makeRun;

void writeCompare(const std::string& dir, const std::string& name, const model::RunModel& a,
                  const model::RunModel& b, double tolerance = 0) {
  analysis::CompareOptions opts;
  opts.labelA = "baseline";
  opts.labelB = "candidate";
  if (tolerance > 0) opts.tolerance = tolerance;
  const auto c = analysis::compareRuns(a, b, opts);
  report::writeMarkdown(c, dir + "/" + name + ".md");
  report::writeHtml(c, dir + "/" + name + ".html");
  report::writeJson(c, dir + "/" + name + ".json");
}

void writeRun(const std::string& dir, const std::string& name, const model::RunModel& run) {
  report::writeChromeTrace(run, dir + "/" + name + ".trace.json");
  auto rep = analysis::checkRun(run);
  rep.seconds = 0;  // measured times: the only part that differs from one call to the next
  for (auto& check : rep.checks) check.seconds = 0;
  report::writeTextFile(dir + "/" + name + ".check.txt", report::renderCheckText(rep));
  report::writeCheckJson(rep, dir + "/" + name + ".check.json");
  report::writeJUnit(rep, dir + "/" + name + ".junit.xml");
}

// Two collectives per rank pair (one pending) and a hang diagnosis on the last rank.
void plantCollectives(model::RunModel& run) {
  const int64_t t = run.actions.empty() || run.actions[0].empty() ? 0 : run.actions[0][0].startNs;
  for (int rank = 0; rank < 2; ++rank) {
    for (int seq = 0; seq < 2; ++seq) {
      events::CollectiveRecord c;
      c.rank = rank;
      c.groupSeq = seq;
      c.op = seq == 0 ? "all_reduce" : "broadcast";
      c.group = "world";
      c.groupRank = rank;
      c.groupSize = 2;
      c.groupRanks = {0, 1};
      c.reduceOp = seq == 0 ? "sum" : "";
      c.shape = {4};
      c.dtype = "float32";
      c.bytes = 16;
      c.startNs = t + 1000 * (seq + 1) + 300 * rank;
      c.endNs = rank == 1 && seq == 1 ? 0 : c.startNs + 5000;
      c.state = c.endNs ? "completed" : "pending";
      c.outChecksum = c.endNs ? 0xabc : 0;
      run.collectives.push_back(c);
    }
  }
  events::DiagnosisRecord d;
  d.rank = 1;
  d.kind = events::DiagnosisKind::Hang;
  d.waitsOnRank = 0;
  d.message = "rank 1 waits in RF mb2 for rank 0";
  run.diagnoses.push_back(d);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: report_snapshots DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto a = makeRun({.tp = 2, .pp = 4, .microbatches = 8, .iterations = 4, .seed = 1});
  auto b = makeRun(
      {.tp = 1, .pp = 4, .microbatches = 8, .iterations = 4, .seed = 2, .forwardNs = 1'200'000});
  auto same = makeRun({.tp = 1, .pp = 4, .microbatches = 8, .iterations = 4, .seed = 1});
  writeCompare(dir, "diverged", a, b);
  writeCompare(dir, "identical", a, same);
  auto two = makeRun({.pp = 2, .iterations = 2});
  writeCompare(dir, "incomplete", two, report::testing::killedAt(two, 1));

  auto nudged = two;  // every loss 1e-7 off: equal within a tolerance of 1e-6
  for (auto& l : nudged.losses) l.loss *= 1 + 1e-7;
  writeCompare(dir, "tolerance", two, nudged, 1e-6);
  auto nonFinite = two;
  nonFinite.losses.at(1).loss = NAN;
  writeCompare(dir, "nonfinite", two, nonFinite);

  auto spec = testing::defaultSyntheticSpec();
  const auto synthA = testing::makeSyntheticRun(spec);
  spec.divergeIteration = 1;
  spec.divergeMicrobatch = 2;
  writeCompare(dir, "synthetic", synthA, testing::makeSyntheticRun(spec));
  writeCompare(dir, "layouts", synthA, testing::makeSyntheticRun(testing::alternateLayoutSpec()));

  writeRun(dir, "fixture", a);
  auto planted = two;
  plantCollectives(planted);
  planted.info.status = events::RunStatus::Hung;
  planted.info.statusReason = "watchdog: no progress for 30 s";
  writeRun(dir, "collectives", planted);
  writeRun(dir, "colocated", testing::makeSyntheticRun(testing::colocatedSyntheticSpec()));
  auto nanSpec = testing::defaultSyntheticSpec();
  nanSpec.nanIteration = 0;
  nanSpec.nanMicrobatch = 1;
  writeRun(dir, "nan", testing::makeSyntheticRun(nanSpec));
  return 0;
}
