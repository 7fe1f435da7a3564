// The HTML comparison report: one self-contained page (inline CSS, inline SVG, no scripts).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "app/report/CompareReport.h"
#include "app/report/Escape.h"
#include "app/report/Headline.h"
#include "app/report/ReportFormat.h"
#include "app/report/SvgCharts.h"
#include "storage/TextFile.h"

namespace stagescope::report {

using namespace analysis;

namespace {

std::string h(const std::string& s) {
  return xmlEscape(s);
}

constexpr const NumberFormat& fmt = kHtmlNumbers;  // a NaN reads "&ndash;"

// A run's measured bubble against 1F1B's (p-1)/(m+p-1): "22.2% vs 20.0% (p=2, m=4)".
std::string bubbleVsExpected(const TimeBreakdown& t) {
  return fmt.percent(t.measuredBubble) + " vs " + fmt.percent(t.expectedBubble) +
         " (p=" + std::to_string(t.stages) + ", m=" + std::to_string(t.microbatches) + ")";
}

const char* kCss = R"CSS(
:root { --fg:#111827; --muted:#6b7280; --line:#e5e7eb; --bg:#f9fafb; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--fg); background: var(--bg); margin: 0; }
main { max-width: 1000px; margin: 0 auto; padding: 24px 28px 60px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.sub { color: var(--muted); margin-bottom: 16px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px;
        margin: 10px 0; }
.verdict { display: flex; gap: 14px; align-items: center; }
.badge { font-weight: 700; padding: 6px 12px; border-radius: 999px; color: #fff; white-space: nowrap; }
.badge.identical { background: #16a34a; } .badge.tolerance { background: #ca8a04; }
.badge.diverged { background: #dc2626; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: #f3f4f6; font-weight: 600; }
td.num, th.num { text-align: right; }
.a { color: #2563eb; } .b { color: #ea580c; }
.bad { color: #dc2626; font-weight: 600; } .ok { color: #16a34a; } .warn { color: #ca8a04; }
code, pre, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: 12.5px; }
pre.diff { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px;
           overflow-x: auto; margin: 0; }
pre.diff .add { background: #dcfce7; display: block; } pre.diff .del { background: #fee2e2; display: block; }
pre.diff .ctx { color: var(--muted); display: block; }
svg.chart { max-width: 100%; height: auto; display: block; }
svg .grid { stroke: #eef0f3; } svg .axis { stroke: #9ca3af; }
svg .tick { font-size: 11px; fill: #4b5563; } svg .label { font-size: 12px; fill: #374151; }
svg .legend { font-size: 12px; fill: #111827; } svg .value { font-size: 10px; fill: #4b5563; }
svg .muted { fill: var(--muted); }
details { margin: 8px 0; } summary { cursor: pointer; color: #374151; }
pre.diff span { min-height: 1.2em; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.kpi { font-size: 20px; font-weight: 700; } .muted { color: var(--muted); }
)CSS";

// One row of a two-run table: `key` and the values are HTML already.
void row(std::ostringstream& o, const std::string& key, const std::string& a,
         const std::string& b) {
  o << "<tr><th>" << key << "</th><td>" << a << "</td><td>" << b << "</td></tr>";
}

// The header row of a two-run table: an empty corner, then one column per run label.
void twoRunTableHead(std::ostringstream& o, const Comparison& c) {
  o << "<table><tr><th></th><th class=\"a\">" << h(c.a.label) << "</th><th class=\"b\">"
    << h(c.b.label) << "</th></tr>";
}

// A run's name in chart legends: "label (run name)".
std::string legend(const RunSummary& s) {
  return s.label + " (" + s.name + ")";
}

// The document's head (title, CSS) and the page title with the two runs.
void pageStart(std::ostringstream& o, const Comparison& c) {
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    << "<title>stagescope compare: " << h(c.a.name) << " vs " << h(c.b.name) << "</title>"
    << "<style>" << kCss << "</style></head><body><main>\n";
  o << "<h1>stagescope compare</h1><div class=\"sub\"><span class=\"a\">" << h(legend(c.a))
    << "</span> vs <span class=\"b\">" << h(legend(c.b)) << "</span></div>\n";
}

// The verdict: its badge and headline (Headline.h; a cut headline's rest below it), what it
// rests on, and the missing records the headline does not state.  Each is said once: the
// first divergence has its own card (firstDivergence).
void verdict(std::ostringstream& o, const Comparison& c) {
  const char* cls = c.verdict == Verdict::Identical         ? "identical"
                    : c.verdict == Verdict::WithinTolerance ? "tolerance"
                                                            : "diverged";
  const Headline line = headlineOf(c, Restate::Never);
  o << "<div class=\"card verdict\" id=\"verdict\"><span class=\"badge " << cls << "\">"
    << h(toString(c.verdict)) << "</span><span>" << h(line.text) << "</span></div>\n";
  if (!line.rest.empty()) o << "<div class=\"card\" id=\"reason\">… " << h(line.rest) << "</div>\n";
  o << "<div class=\"card\" id=\"evidence\"><b>Evidence:</b> " << h(c.evidence)
    << "<br><b>Tolerance:</b> " << h(c.toleranceRule) << "</div>\n";
  if (line.missingStated < c.missing.size()) {
    o << "<div class=\"card\" id=\"missing\"><b>"
      << (line.missingStated ? "Also missing:" : "Missing (why not equal):") << "</b><ul>";
    for (size_t i = line.missingStated; i < c.missing.size(); ++i)
      o << "<li>" << h(c.missing[i]) << "</li>";
    o << "</ul></div>\n";
  }
}

// The causally first item that differs; its kind and key as attributes for scripts.
void firstDivergence(std::ostringstream& o, const Comparison& c) {
  o << "<h2>First divergence (causal order)</h2>\n<div class=\"card\" id=\"first-divergence\" "
    << "data-kind=\"" << (c.first ? toString(c.first->kind) : "") << "\" data-key=\""
    << h(c.first ? c.first->key : "") << "\">" << (c.first ? h(c.firstText) : "none") << "</div>\n";
}

// The two runs side by side, then the key figures of the comparison.
void summary(std::ostringstream& o, const Comparison& c) {
  const RunSummary &a = c.a, &b = c.b;
  auto code = [](const std::string& s) { return "<code>" + h(s) + "</code>"; };
  auto status = [](const RunSummary& s) {
    return h(s.status + (s.statusReason.empty() ? "" : ": " + s.statusReason));
  };
  auto stepTime = [](const TimeBreakdown& t) {
    return fmt(t.medianStepMs, "%.3f") + " / " + fmt(t.meanStepMs, "%.3f") + " ms";
  };
  o << "<h2>Summary</h2>";
  twoRunTableHead(o, c);
  row(o, "run", code(a.name), code(b.name));
  row(o, "file", code(a.path), code(b.path));
  row(o, "status", status(a), status(b));
  row(o, "layout", h(a.layout), h(b.layout));
  row(o, "ranks", std::to_string(a.worldSize), std::to_string(b.worldSize));
  row(o, "iterations &times; microbatches",
      std::to_string(a.iterations) + " &times; " + std::to_string(a.microbatches),
      std::to_string(b.iterations) + " &times; " + std::to_string(b.microbatches));
  row(o, "recording level", h(a.level), h(b.level));
  row(o, "events", std::to_string(a.events), std::to_string(b.events));
  row(o, "config hash", code(a.configHash), code(b.configHash));
  row(o, "step time (median / mean)", stepTime(a.time), stepTime(b.time));
  row(o, "bubble measured vs (p&minus;1)/(m+p&minus;1)", bubbleVsExpected(a.time),
      bubbleVsExpected(b.time));
  o << "</table>\n";
  o << "<div class=\"grid2\"><div class=\"card\"><div class=\"muted\">messages compared / "
       "differing</div><div class=\"kpi\">"
    << c.transfersCompared << " / "
    << (c.transfersDiffering ? "<span class=\"bad\">" : "<span class=\"ok\">")
    << c.transfersDiffering << "</span></div><div class=\"muted\">only in " << h(a.label) << ": "
    << c.transfersOnlyA << ", only in " << h(b.label) << ": " << c.transfersOnlyB
    << "</div></div><div class=\"card\"><div class=\"muted\">max relative difference: loss / "
       "reduced gradient</div><div class=\"kpi\">"
    << fmt.difference(c.maxLossRelDiff) << " / " << fmt.difference(c.maxGradRelDiff)
    << "</div><div class=\"muted\">" << c.lossesCompared << " losses, " << c.gradsCompared
    << " reduced gradients compared</div></div></div>\n";
}

// One side of the first divergent message, for its table.
std::string checksums(const TransferSideInfo& s) {
  if (!s.present) return "(absent)";
  std::string r;
  for (auto v : s.checksums) r += (r.empty() ? "" : "<br>") + formatChecksum(v);
  return "<code>" + r + "</code>";
}
std::string ranks(const TransferSideInfo& s) {
  return s.present ? std::to_string(s.srcRank) + " &rarr; " + std::to_string(s.dstRank)
                   : std::string("&ndash;");
}
std::string shape(const TransferSideInfo& s) {
  return s.present ? h(formatShape(s.shape) + " " + s.dtype) : "&ndash;";
}
std::string stat(const TransferSideInfo& s, double events::TensorStats::*field) {
  return s.present && s.hasStats ? analysis::formatValue(s.stats.*field) : "&ndash;";
}
std::string nonFiniteCounts(const TransferSideInfo& s) {
  if (!s.present || !s.hasStats) return "&ndash;";
  return std::to_string(s.stats.nanCount) + " / " + std::to_string(s.stats.infCount);
}

// The causally first message whose payload differs (both sides in a table), or why none.
void firstDivergentMessage(std::ostringstream& o, const Comparison& c) {
  o << "<h2>First divergent message (causal order)</h2>";
  if (!c.firstDivergent && c.transfersCompared == 0) {
    // Nothing aligned is not "nothing differs": say what could not be compared.
    o << "<div class=\"card warn\">No message was compared: " << c.transfersOnlyA << " only in "
      << h(c.a.label) << ", " << c.transfersOnlyB << " only in " << h(c.b.label) << ".</div>\n";
    return;
  }
  if (!c.firstDivergent) {
    o << "<div class=\"card ok\">No message differs beyond tolerance among the "
      << c.transfersCompared << " compared"
      << (c.transfersComparable ? "." : " (checksums were not recorded: level below stats).")
      << "</div>\n";
    return;
  }
  const auto& d = *c.firstDivergent;
  o << "<div class=\"card\"><div><b>edge <code>" << h(d.edge) << "</code></b>, "
    << toString(d.direction) << ", iteration " << d.iteration << ", microbatch " << d.microbatch
    << ", dp replica " << d.srcDp << " &mdash; reason: <span class=\"bad\">" << h(d.reason)
    << "</span>";
  if (!std::isnan(d.relDiff)) {
    o << ", relative difference " << fmt.difference(d.relDiff) << " (max abs "
      << fmt.difference(d.maxAbsDiff) << ")";
  }
  o << "</div>";
  twoRunTableHead(o, c);
  row(o, "ranks (src &rarr; dst)", ranks(d.a), ranks(d.b));
  row(o, "checksum", checksums(d.a), checksums(d.b));
  row(o, "shape / dtype", shape(d.a), shape(d.b));
  using Stats = events::TensorStats;
  row(o, "min", stat(d.a, &Stats::min), stat(d.b, &Stats::min));
  row(o, "max", stat(d.a, &Stats::max), stat(d.b, &Stats::max));
  row(o, "mean", stat(d.a, &Stats::mean), stat(d.b, &Stats::mean));
  row(o, "l2", stat(d.a, &Stats::l2), stat(d.b, &Stats::l2));
  row(o, "NaN / Inf", nonFiniteCounts(d.a), nonFiniteCounts(d.b));
  o << "</table></div>\n";
}

// The loss chart: per microbatch in schedule order up to 400 points, else the iteration means.
void lossChart(std::ostringstream& o, const Comparison& c) {
  o << "<h2>Loss</h2>";
  std::vector<double> ya, yb;
  std::vector<bool> noA, noB;
  for (const auto& r : c.losses) {
    ya.push_back(r.hasA ? r.a : NAN);
    yb.push_back(r.hasB ? r.b : NAN);
    noA.push_back(!r.hasA);
    noB.push_back(!r.hasB);
  }
  const bool perMb = ya.size() <= 400;
  if (!perMb) {
    ya = c.iterLossA;
    yb = c.iterLossB;
    noA.clear();
    noB.clear();
    for (int k : c.iterLossCountA) noA.push_back(k == 0);
    for (int k : c.iterLossCountB) noB.push_back(k == 0);
  }
  o << "<div class=\"card\" id=\"loss-chart\">"
    << lineChart({{legend(c.a), kColorA, ya, false, noA}, {legend(c.b), kColorB, yb, true, noB}},
                 perMb ? "(iteration, microbatch) in schedule order" : "iteration",
                 perMb ? "loss per microbatch" : "mean loss")
    << "</div>";
}

// The first 64 loss rows, folded away (the JSON report has them all).
void lossTable(std::ostringstream& o, const Comparison& c) {
  o << "<details><summary>" << c.losses.size()
    << " loss rows (iteration, microbatch, dp replica)</summary>";
  o << "<table><tr><th class=\"num\">iteration</th><th class=\"num\">microbatch</th><th "
       "class=\"num\">dp</th><th class=\"num a\">"
    << h(c.a.label) << "</th><th class=\"num b\">" << h(c.b.label)
    << "</th><th class=\"num\">difference</th></tr>";
  size_t shown = 0;
  for (const auto& r : c.losses) {
    if (shown++ >= 64) break;
    const bool differs = !(r.hasA && r.hasB) || r.a != r.b;
    o << "<tr><td class=\"num\">" << r.iteration << "</td><td class=\"num\">" << r.microbatch
      << "</td><td class=\"num\">" << (r.dp < 0 ? std::string("mean") : std::to_string(r.dp))
      << "</td><td class=\"num\">" << (r.hasA ? fmt(r.a, "%.9g") : "&ndash;")
      << "</td><td class=\"num\">" << (r.hasB ? fmt(r.b, "%.9g") : "&ndash;")
      << "</td><td class=\"num" << (differs ? " bad" : "") << "\">" << fmt.difference(r.diff)
      << "</td></tr>";
  }
  o << "</table>";
  if (c.losses.size() > 64) {
    o << "<div class=\"muted\">" << c.losses.size() - 64 << " more rows in the JSON report.</div>";
  }
  o << "</details>";
}

// The gradient norms that differ most (or, all equal, those of the last iteration): bars, the
// total norm per iteration, and a table.
void gradients(std::ostringstream& o, const Comparison& c) {
  o << "<h2>Gradient norms</h2>";
  const auto& rows = c.gradTop.empty() ? c.gradLast : c.gradTop;
  std::vector<std::string> labels;
  std::vector<double> va, vb;
  for (size_t i = 0; i < rows.size() && i < 20; ++i) {
    labels.push_back(rows[i].param +
                     (c.gradTop.empty() ? "" : " @" + std::to_string(rows[i].iteration)));
    va.push_back(rows[i].normA);
    vb.push_back(rows[i].normB);
  }
  o << "<div class=\"muted\">"
    << (c.gradTop.empty() ? "All parameters agree bitwise; norms at the last common iteration."
                          : "Parameters whose gradients differ most (largest relative "
                            "difference, worst iteration).")
    << "</div>";
  o << "<div class=\"card\" id=\"grad-chart\">"
    << barChart(labels, va, vb, legend(c.a), legend(c.b)) << "</div>";
  if (c.totalNormA.size() > 1 || c.totalNormB.size() > 1) {
    o << "<div class=\"card\" id=\"gradnorm-chart\">"
      << lineChart({{legend(c.a), kColorA, c.totalNormA, false, nonFiniteAsAbsent(c.totalNormA)},
                    {legend(c.b), kColorB, c.totalNormB, true, nonFiniteAsAbsent(c.totalNormB)}},
                   "iteration", "total gradient norm", 900, 240)
      << "</div>";
  }
  o << "<table><tr><th>parameter</th><th class=\"num\">iteration</th><th class=\"num a\">"
    << h(c.a.label) << "</th><th class=\"num b\">" << h(c.b.label)
    << "</th><th class=\"num\">rel. diff</th><th>compared by</th></tr>";
  for (size_t i = 0; i < rows.size() && i < 40; ++i) {
    const auto& g = rows[i];
    o << "<tr><td><code>" << h(g.param) << "</code></td><td class=\"num\">" << g.iteration
      << "</td><td class=\"num\">" << (g.hasA ? analysis::formatValue(g.normA, 9) : "&ndash;")
      << "</td><td class=\"num\">" << (g.hasB ? analysis::formatValue(g.normB, 9) : "&ndash;")
      << "</td><td class=\"num" << (g.bitwiseEqual ? "" : " bad") << "\">"
      << fmt.difference(g.relDiff) << "</td><td>" << h(g.how) << "</td></tr>";
  }
  o << "</table>";
}

// Step time per iteration, then each run's time per rank and bubble.
void timePerRank(std::ostringstream& o, const Comparison& c) {
  o << "<h2>Time per rank</h2>";
  const std::vector<double>&sa = c.a.time.stepMs, &sb = c.b.time.stepMs;
  if (sa.size() > 1 || sb.size() > 1) {
    o << "<div class=\"card\" id=\"step-chart\">"
      << lineChart({{legend(c.a), kColorA, sa, false, nonFiniteAsAbsent(sa)},
                    {legend(c.b), kColorB, sb, true, nonFiniteAsAbsent(sb)}},
                   "iteration", "step time (ms)", 900, 220)
      << "</div>";
  }
  for (const auto* s : {&c.a, &c.b}) {
    o << "<div class=\"card time-chart\"><div><b class=\"" << (s == &c.a ? "a" : "b") << "\">"
      << h(s->label) << "</b> <code>" << h(s->name) << "</code> &mdash; measured bubble "
      << fmt.percent(s->time.measuredBubble)
      << ", expected (p&minus;1)/(m+p&minus;1) = " << fmt.percent(s->time.expectedBubble)
      << "</div>" << timeChart(*s) << "</div>";
  }
}

// A module's gradients all off by one factor (GradientRatio.h): the diagnosis, stated once.
void gradientRatios(std::ostringstream& o, const Comparison& c) {
  if (c.gradientRatios.empty()) return;
  o << "<h2>Uniform gradient ratios</h2><div class=\"card\" id=\"ratios\"><ul>";
  for (const auto& r : c.gradientRatios) o << "<li>" << h(r) << "</li>";
  o << "</ul></div>\n";
}

// Schedules: the order each rank ran its actions in, run against run (never the verdict).
void schedules(std::ostringstream& o, const Comparison& c) {
  o << "<h2>Schedules</h2><div class=\"card" << (c.schedule.differs() ? "" : " ok")
    << "\" id=\"schedules\">" << h(c.schedule.describe(c.a.label, c.b.label));
  if (!c.captureAgainstPlan.empty()) o << "<br>" << h(c.captureAgainstPlan);
  o << "</div>\n";
}

// The two configurations' line diff, or that they are identical.
void configuration(std::ostringstream& o, const Comparison& c) {
  o << "<h2>Configuration</h2>";
  if (c.configEqual) {
    o << "<div class=\"card ok\">The configurations are identical.</div>";
    return;
  }
  o << "<pre class=\"diff\">";
  for (const auto& l : c.configDiff) {
    const char* k = l.op == '+' ? "add" : l.op == '-' ? "del" : "ctx";
    o << "<span class=\"" << k << "\">" << (l.op == ' ' ? ' ' : l.op) << " " << h(l.text)
      << "</span>";
  }
  o << "</pre>";
}

// How runs are aligned (the same on every report), and the end of the page.
void pageEnd(std::ostringstream& o) {
  o << "<p class=\"muted\">Generated by stagescope. Runs are aligned by logical identity (edge, "
       "direction, iteration, microbatch; parameter name with TP shards gathered), never by "
       "rank.</p>";
  o << "</main></body></html>\n";
}

}  // namespace

std::string renderHtml(const Comparison& c) {
  std::ostringstream o;
  pageStart(o, c);
  verdict(o, c);
  firstDivergence(o, c);
  summary(o, c);
  firstDivergentMessage(o, c);
  lossChart(o, c);
  lossTable(o, c);
  gradients(o, c);
  timePerRank(o, c);
  gradientRatios(o, c);
  schedules(o, c);
  configuration(o, c);
  pageEnd(o);
  return o.str();
}

void writeHtml(const Comparison& c, const std::string& path) {
  writeTextFile(path, renderHtml(c));
}

}  // namespace stagescope::report
