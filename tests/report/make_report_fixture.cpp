// Writes the HTML comparison report of two fixture runs (used by the headless Chromium test).
// Usage: make_report_fixture OUT.html
#include <cstdio>

#include "Fixture.h"
#include "app/report/CompareReport.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_report_fixture OUT.html\n");
    return 2;
  }
  using stagescope::report::testing::makeRun;
  auto a = makeRun({.tp = 2, .pp = 4, .dp = 1, .microbatches = 8, .iterations = 4, .seed = 1});
  auto b = makeRun({.tp = 1,
                    .pp = 4,
                    .dp = 1,
                    .microbatches = 8,
                    .iterations = 4,
                    .seed = 2,
                    .forwardNs = 1'200'000});
  stagescope::analysis::CompareOptions opts;
  opts.labelA = "baseline";
  opts.labelB = "candidate";
  auto c = stagescope::analysis::compareRuns(a, b, opts);
  stagescope::report::writeHtml(c, argv[1]);
  return 0;
}
