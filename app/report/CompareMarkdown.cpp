// The Markdown comparison report (a PR comment, a CI summary): the verdict first, then the
// runs side by side, the counts, and one section per kind of evidence.  Each section is a
// function below, called in page order by renderMarkdown.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "app/report/CompareReport.h"
#include "app/report/Headline.h"
#include "app/report/ReportFormat.h"
#include "core/events/Printable.h"
#include "storage/TextFile.h"

namespace stagescope::report {

using namespace analysis;

namespace {

constexpr const NumberFormat& fmt = kMarkdownNumbers;  // a NaN reads "-"

// Text from the run files (run ids, labels, reasons) in Markdown prose or a table cell: one
// printable line (events::printableLine: control characters and invalid UTF-8 as \xNN, so it
// can neither break the table nor drive a terminal the report is printed to), `|` escaped for
// tables, and `<` as an entity, so that a run id such as `<img src=x onerror=...>` is shown,
// never rendered live (Markdown passes raw HTML through, and no tag opens without `<`).
std::string mdEscape(const std::string& s) {
  std::string o;
  for (char ch : events::printableLine(s)) {
    switch (ch) {
      case '|':
        o += "\\|";
        break;
      case '<':  // enough to keep any tag from opening; '>' (as in "pp0->pp1") stays readable
        o += "&lt;";
        break;
      default:
        o += ch;
    }
  }
  return o;
}

// The same text as a code span: Markdown interprets nothing inside one (so no entities, which
// it would show as typed); a backtick, which would end the span, becomes a quote.
std::string mdCode(const std::string& s) {
  std::string o = "`";
  for (char ch : events::printableLine(s)) o += ch == '`' ? '\'' : ch == '|' ? '/' : ch;
  return o + "`";
}

// One row of a two-run table: `key` is Markdown already, the values are run text (escaped).
void row(std::ostringstream& o, const std::string& key, const std::string& a,
         const std::string& b) {
  o << "| " << key << " | " << mdEscape(a) << " | " << mdEscape(b) << " |\n";
}

// The header of a two-run table: an empty corner, then one column per run label.
void twoRunTable(std::ostringstream& o, const Comparison& c) {
  o << "| | " << mdEscape(c.a.label) << " | " << mdEscape(c.b.label) << " |\n|---|---|---|\n";
}

// The title, the verdict (its headline: Headline.h) and what it rests on: evidence,
// tolerance, first divergence and the missing records the headline does not state.
void headline(std::ostringstream& o, const Comparison& c) {
  const char* badge = c.verdict == Verdict::Identical         ? "IDENTICAL"
                      : c.verdict == Verdict::WithinTolerance ? "EQUAL WITHIN TOLERANCE"
                      : c.verdict == Verdict::Incomplete      ? "INCOMPLETE"
                                                              : "DIVERGED";
  const Headline line = headlineOf(c, Restate::WhileItFits);
  o << "## stagescope compare: " << mdCode(c.a.name) << " vs " << mdCode(c.b.name) << "\n\n";
  o << "**Verdict: " << badge << "** — " << mdEscape(line.text) << "\n\n";
  if (!line.rest.empty()) o << "- … " << mdEscape(line.rest) << "\n";
  o << "- Evidence: " << mdEscape(c.evidence) << "\n";
  o << "- Tolerance: " << mdEscape(c.toleranceRule) << "\n";
  o << "- First divergence (causal order): " << (c.first ? mdEscape(c.firstText) : "none") << "\n";
  for (size_t i = line.missingStated; i < c.missing.size(); ++i)
    o << "- Missing: " << mdEscape(c.missing[i]) << "\n";
  o << "\n";
}

// The two runs side by side: identity, shape of the run, step time and bubble.
void summary(std::ostringstream& o, const Comparison& c) {
  twoRunTable(o, c);
  row(o, "run", c.a.name, c.b.name);
  row(o, "status", c.a.status, c.b.status);
  row(o, "layout", c.a.layout, c.b.layout);
  row(o, "ranks", std::to_string(c.a.worldSize), std::to_string(c.b.worldSize));
  row(o, "iterations x microbatches",
      std::to_string(c.a.iterations) + " x " + std::to_string(c.a.microbatches),
      std::to_string(c.b.iterations) + " x " + std::to_string(c.b.microbatches));
  row(o, "recording level", c.a.level, c.b.level);
  row(o, "events", std::to_string(c.a.events), std::to_string(c.b.events));
  row(o, "step time (median)", fmt.milliseconds(c.a.time.medianStepMs),
      fmt.milliseconds(c.b.time.medianStepMs));
  row(o, "bubble measured / expected",
      fmt.percent(c.a.time.measuredBubble) + " / " + fmt.percent(c.a.time.expectedBubble),
      fmt.percent(c.b.time.measuredBubble) + " / " + fmt.percent(c.b.time.expectedBubble));
  o << "\n";
}

// What was compared, kind by kind; "differ" means beyond the tolerance rule, and "within
// tolerance" (not bitwise equal, but inside the rule) is counted apart.
void counts(std::ostringstream& o, const Comparison& c) {
  o << "- Messages: " << c.transfersCompared << " compared, " << c.transfersDiffering << " differ, "
    << c.transfersWithinTolerance << " within tolerance, " << c.transfersOnlyA << " only in "
    << c.a.label << ", " << c.transfersOnlyB << " only in " << c.b.label << "\n";
  o << "- Losses: " << c.lossesCompared << " compared, " << c.lossesDiffering << " differ, "
    << c.lossesWithinTolerance << " within tolerance, max relative difference "
    << fmt.difference(c.maxLossRelDiff) << "\n";
  o << "- Reduced gradients: " << c.gradsCompared << " (parameter, iteration) compared, "
    << c.gradsDiffering << " differ, " << c.gradsWithinTolerance
    << " within tolerance, max relative difference " << fmt.difference(c.maxGradRelDiff) << "\n";
  for (const auto& r : c.gradientRatios) o << "- Uniform gradient ratio: " << mdEscape(r) << "\n";
  o << "- Config: " << (c.configEqual ? "identical" : "differs (see below)") << "\n";
  o << "- Schedules: " << c.schedule.describe(c.a.label, c.b.label) << "\n";
  if (!c.captureAgainstPlan.empty())
    o << "- Schedule against the plan: " << mdEscape(c.captureAgainstPlan) << "\n";
  o << "\n";
}

// One side of the first divergent message, for its table.
std::string checksums(const TransferSideInfo& s) {
  if (!s.present) return "(absent)";
  std::string r;
  for (auto v : s.checksums) r += (r.empty() ? "" : ", ") + formatChecksum(v);
  return r;
}
std::string ranks(const TransferSideInfo& s) {
  return s.present ? std::to_string(s.srcRank) + " -> " + std::to_string(s.dstRank) : "-";
}
std::string shape(const TransferSideInfo& s) {
  return s.present ? formatShape(s.shape) + " " + s.dtype : "-";
}
std::string stat(const TransferSideInfo& s, double events::TensorStats::*field) {
  return s.present && s.hasStats ? analysis::formatValue(s.stats.*field) : "-";
}

// The causally first message whose payload differs, both sides in a table.
void firstDivergentMessage(std::ostringstream& o, const Comparison& c) {
  if (!c.firstDivergent) return;
  const auto& d = *c.firstDivergent;
  o << "### First divergent message (causal order)\n\n";
  o << mdCode(d.edge) << " " << toString(d.direction) << ", iteration " << d.iteration
    << ", microbatch " << d.microbatch << " (dp " << d.srcDp << "), reason: " << mdEscape(d.reason);
  if (!std::isnan(d.relDiff)) o << ", relative difference " << fmt.difference(d.relDiff);
  o << "\n\n";
  twoRunTable(o, c);
  row(o, "ranks", ranks(d.a), ranks(d.b));
  row(o, "checksum", checksums(d.a), checksums(d.b));
  row(o, "shape", shape(d.a), shape(d.b));
  row(o, "mean", stat(d.a, &events::TensorStats::mean), stat(d.b, &events::TensorStats::mean));
  row(o, "l2", stat(d.a, &events::TensorStats::l2), stat(d.b, &events::TensorStats::l2));
  row(o, "max", stat(d.a, &events::TensorStats::max), stat(d.b, &events::TensorStats::max));
  o << "\n";
}

// The mean loss of each iteration, the first 50 iterations.
void lossPerIteration(std::ostringstream& o, const Comparison& c) {
  if (c.iterLossA.empty() && c.iterLossB.empty()) return;
  o << "### Loss per iteration (mean over microbatches)\n\n| iteration | " << mdEscape(c.a.label)
    << " | " << mdEscape(c.b.label) << " | difference |\n|---:|---:|---:|---:|\n";
  const size_t n = std::max(c.iterLossA.size(), c.iterLossB.size());
  for (size_t i = 0; i < n && i < 50; ++i) {
    const bool hasX = i < c.iterLossCountA.size() && c.iterLossCountA[i] > 0;
    const bool hasY = i < c.iterLossCountB.size() && c.iterLossCountB[i] > 0;
    const double x = hasX ? c.iterLossA[i] : NAN, y = hasY ? c.iterLossB[i] : NAN;
    o << "| " << i << " | " << (hasX ? analysis::formatValue(x, 9) : "-") << " | "
      << (hasY ? analysis::formatValue(y, 9) : "-") << " | "
      << (hasX && hasY ? analysis::formatValue(y - x, 3) : "-") << " |\n";
  }
  if (n > 50) o << "| ... | | | |\n";
  o << "\n";
}

// The ten (parameter, iteration) gradient norms that differ most.
void gradients(std::ostringstream& o, const Comparison& c) {
  if (c.gradTop.empty()) return;
  o << "### Gradient norms that differ most\n\n| parameter | iteration | " << mdEscape(c.a.label)
    << " | " << mdEscape(c.b.label) << " | rel. diff |\n|---|---:|---:|---:|---:|\n";
  for (size_t i = 0; i < c.gradTop.size() && i < 10; ++i) {
    const auto& g = c.gradTop[i];
    o << "| " << mdCode(g.param) << " | " << g.iteration << " | "
      << (g.hasA ? analysis::formatValue(g.normA) : "-") << " | "
      << (g.hasB ? analysis::formatValue(g.normB) : "-") << " | " << fmt.difference(g.relDiff)
      << " |\n";
  }
  o << "\n";
}

// Each run's time per rank (ms) and bubble, folded away.
void timePerRank(std::ostringstream& o, const Comparison& c) {
  o << "<details><summary>Time per rank</summary>\n\n";
  for (const auto* s : {&c.a, &c.b}) {
    o << "**" << mdEscape(s->label) << "** (" << mdCode(s->name) << ")\n\n"
      << "| rank | module | tp/pp/dp | forward ms | backward ms | comm ms | other ms | idle ms | "
         "bubble |\n|---:|---|---|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& r : s->time.ranks) {
      o << "| " << r.rank << " | " << mdEscape(r.module) << " | " << r.tp << "/" << r.pp << "/"
        << r.dp << " | " << fmt(r.forwardMs, "%.2f") << " | " << fmt(r.backwardMs, "%.2f") << " | "
        << fmt(r.commMs, "%.2f") << " | " << fmt(r.otherMs, "%.2f") << " | "
        << fmt(r.idleMs, "%.2f") << " | " << fmt.percent(r.bubble) << " |\n";
    }
    o << "\n";
  }
  o << "</details>\n\n";
}

// The changed lines of the two configurations, folded away; nothing when they are equal.
void configDiff(std::ostringstream& o, const Comparison& c) {
  if (c.configEqual) return;
  o << "<details><summary>Config diff</summary>\n\n```diff\n";
  for (const auto& l : c.configDiff) {
    if (l.op != ' ') o << l.op << events::printableLine(l.text) << "\n";
  }
  o << "```\n\n</details>\n";
}

}  // namespace

std::string renderMarkdown(const Comparison& c) {
  std::ostringstream o;
  headline(o, c);
  summary(o, c);
  counts(o, c);
  firstDivergentMessage(o, c);
  lossPerIteration(o, c);
  gradients(o, c);
  timePerRank(o, c);
  configDiff(o, c);
  return o.str();
}

void writeMarkdown(const Comparison& c, const std::string& path) {
  writeTextFile(path, renderMarkdown(c));
}

}  // namespace stagescope::report
