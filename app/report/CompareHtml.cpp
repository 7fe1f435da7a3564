// The HTML comparison report: one self-contained page (inline CSS, inline SVG, no scripts).
#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "app/report/CompareReport.h"
#include "app/report/Escape.h"
#include "app/report/ReportFormat.h"
#include "storage/TextFile.h"

namespace stagescope::report {

using namespace analysis;

namespace {

constexpr const char* kColorA = "#2563eb";
constexpr const char* kColorB = "#ea580c";

std::string h(const std::string& s) {
  return xmlEscape(s);
}

constexpr const NumberFormat& fmt = kHtmlNumbers;  // a NaN reads "&ndash;"

// "Nice" tick values over [lo, hi].
std::vector<double> ticks(double lo, double hi, int target = 5) {
  std::vector<double> out;
  if (!(hi > lo)) {
    out.push_back(lo);
    return out;
  }
  double raw = (hi - lo) / target;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push_back(v);
  return out;
}

struct Series {
  std::string name, color;
  std::vector<double> y;  // a non-finite value is a gap in the line
  bool dashed = false;
  // Positions with no value (not recorded): a plain gap. A recorded non-finite value (NaN,
  // ±Inf) is a gap with a "NaN"/"Inf" marker at the chart's top edge, never dropped silently.
  std::vector<bool> absent;
  bool isAbsent(size_t i) const { return i < absent.size() && absent[i]; }
};

// Every non-finite position of `y` as absent: for series that do not tell a recorded NaN from a
// missing value (a plain gap, as before).
std::vector<bool> nonFiniteAsAbsent(const std::vector<double>& y) {
  std::vector<bool> out;
  for (double v : y) out.push_back(!std::isfinite(v));
  return out;
}

// The recorded non-finite values of the series: a dotted line across the plot at x and the
// value's name at the top edge, in the series' colour.
void nonFiniteMarkers(std::ostringstream& o, const std::vector<Series>& series,
                      const std::function<double(double)>& X, double top, double bottom) {
  for (const auto& s : series) {
    for (size_t i = 0; i < s.y.size(); ++i) {
      if (std::isfinite(s.y[i]) || s.isAbsent(i)) continue;
      const std::string x = fmt(X(static_cast<double>(i)), "%.1f");
      const char* name = std::isnan(s.y[i]) ? "NaN" : s.y[i] > 0 ? "+Inf" : "-Inf";
      o << "<line class=\"nonfinite\" x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << top
        << "\" y2=\"" << bottom << "\" stroke=\"" << s.color
        << "\" stroke-dasharray=\"2 3\"/><text class=\"nonfinite\" x=\"" << x << "\" y=\""
        << top + (s.dashed ? 22 : 10) << "\" text-anchor=\"middle\" fill=\"" << s.color << "\">"
        << name << "</text>";
    }
  }
}

// A line chart over x = 0..n-1.
std::string lineChart(const std::vector<Series>& series, const std::string& xLabel,
                      const std::string& yLabel, int width = 900, int height = 300) {
  const double l = 70, r = 20, t = 34, b = 45;
  double lo = INFINITY, hi = -INFINITY;
  size_t n = 0;
  bool nonFinite = false;  // a recorded NaN/Inf: drawn even when no value is finite
  for (const auto& s : series) {
    n = std::max(n, s.y.size());
    for (size_t i = 0; i < s.y.size(); ++i) {
      const double v = s.y[i];
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
      nonFinite = nonFinite || (!std::isfinite(v) && !s.isAbsent(i));
    }
  }
  if (!std::isfinite(lo) && nonFinite) lo = 0, hi = 1;
  std::ostringstream o;
  o << "<svg class=\"chart\" viewBox=\"0 0 " << width << " " << height << "\" width=\"" << width
    << "\" height=\"" << height << "\" role=\"img\" xmlns=\"http://www.w3.org/2000/svg\">";
  if (!std::isfinite(lo) || n == 0) {
    o << "<text x=\"" << width / 2 << "\" y=\"" << height / 2
      << "\" text-anchor=\"middle\" class=\"muted\">no data</text></svg>";
    return o.str();
  }
  if (hi == lo) {
    double pad = std::fabs(lo) > 0 ? std::fabs(lo) * 0.05 : 1;
    lo -= pad;
    hi += pad;
  } else {
    double pad = (hi - lo) * 0.05;
    lo -= pad;
    hi += pad;
  }
  double pw = width - l - r, ph = height - t - b;
  auto X = [&](double i) { return l + (n > 1 ? i / static_cast<double>(n - 1) : 0.5) * pw; };
  auto Y = [&](double v) { return t + (1 - (v - lo) / (hi - lo)) * ph; };
  for (double v : ticks(lo, hi)) {
    o << "<line class=\"grid\" x1=\"" << l << "\" x2=\"" << width - r << "\" y1=\"" << Y(v)
      << "\" y2=\"" << Y(v) << "\"/><text class=\"tick\" x=\"" << l - 6 << "\" y=\"" << Y(v) + 4
      << "\" text-anchor=\"end\">" << fmt(v, "%.4g") << "</text>";
  }
  for (double v : ticks(0, static_cast<double>(n - 1), 8)) {
    if (v != std::floor(v)) continue;
    o << "<text class=\"tick\" x=\"" << X(v) << "\" y=\"" << height - b + 16
      << "\" text-anchor=\"middle\">" << static_cast<long long>(v) << "</text>";
  }
  o << "<line class=\"axis\" x1=\"" << l << "\" x2=\"" << l << "\" y1=\"" << t << "\" y2=\""
    << height - b << "\"/><line class=\"axis\" x1=\"" << l << "\" x2=\"" << width - r << "\" y1=\""
    << height - b << "\" y2=\"" << height - b << "\"/>";
  o << "<text class=\"label\" x=\"" << l + pw / 2 << "\" y=\"" << height - 6
    << "\" text-anchor=\"middle\">" << h(xLabel) << "</text>";
  o << "<text class=\"label\" transform=\"translate(16," << t + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << h(yLabel) << "</text>";
  // Decimate very long series to about 2 points per pixel.
  size_t stride = std::max<size_t>(1, n / static_cast<size_t>(2 * pw));
  for (const auto& s : series) {
    std::ostringstream d;
    bool pen = false;
    size_t points = 0;
    for (size_t i = 0; i < s.y.size(); i += stride) {
      if (!std::isfinite(s.y[i])) {
        pen = false;
        continue;
      }
      d << (pen ? "L" : "M") << fmt(X(static_cast<double>(i)), "%.1f") << ","
        << fmt(Y(s.y[i]), "%.1f");
      pen = true;
      ++points;
    }
    o << "<path d=\"" << d.str() << "\" fill=\"none\" stroke=\"" << s.color
      << "\" stroke-width=\"2\"" << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << "/>";
    if (points <= 60) {
      for (size_t i = 0; i < s.y.size(); i += stride) {
        if (!std::isfinite(s.y[i])) continue;
        o << "<circle cx=\"" << fmt(X(static_cast<double>(i)), "%.1f") << "\" cy=\""
          << fmt(Y(s.y[i]), "%.1f") << "\" r=\"3\" fill=\"" << s.color << "\"/>";
      }
    }
  }
  nonFiniteMarkers(o, series, X, t, height - b);
  // Legend.
  double lx = l + 10;
  for (const auto& s : series) {
    o << "<rect x=\"" << lx << "\" y=\"8\" width=\"14\" height=\"4\" fill=\"" << s.color
      << "\"/><text class=\"legend\" x=\"" << lx + 20 << "\" y=\"14\">" << h(s.name) << "</text>";
    lx += 40 + 7.0 * static_cast<double>(s.name.size());
  }
  o << "</svg>";
  return o.str();
}

// Horizontal grouped bars: one group per label, one bar per run.
std::string barChart(const std::vector<std::string>& labels, const std::vector<double>& a,
                     const std::vector<double>& b, const std::string& la, const std::string& lb,
                     int width = 900) {
  const double labelW = 330, r = 90, rowH = 30, top = 30;
  int height = static_cast<int>(top + rowH * static_cast<double>(labels.size()) + 10);
  double mx = 0;
  for (double v : a)
    if (std::isfinite(v)) mx = std::max(mx, v);
  for (double v : b)
    if (std::isfinite(v)) mx = std::max(mx, v);
  if (mx <= 0) mx = 1;
  double pw = width - labelW - r;
  double legendB = 50 + 7.0 * static_cast<double>(la.size());
  std::ostringstream o;
  o << "<svg class=\"chart\" viewBox=\"0 0 " << width << " " << height << "\" width=\"" << width
    << "\" height=\"" << height << "\" role=\"img\" xmlns=\"http://www.w3.org/2000/svg\">";
  o << "<rect x=\"" << labelW << "\" y=\"8\" width=\"14\" height=\"10\" fill=\"" << kColorA
    << "\"/><text class=\"legend\" x=\"" << labelW + 20 << "\" y=\"17\">" << h(la)
    << "</text><rect x=\"" << labelW + legendB << "\" y=\"8\" width=\"14\" height=\"10\" fill=\""
    << kColorB << "\"/><text class=\"legend\" x=\"" << labelW + legendB + 20 << "\" y=\"17\">"
    << h(lb) << "</text>";
  for (size_t i = 0; i < labels.size(); ++i) {
    double y = top + rowH * static_cast<double>(i);
    std::string lab =
        labels[i].size() > 44 ? "…" + labels[i].substr(labels[i].size() - 43) : labels[i];
    o << "<text class=\"tick\" x=\"" << labelW - 8 << "\" y=\"" << y + 18
      << "\" text-anchor=\"end\">" << h(lab) << "<title>" << h(labels[i]) << "</title></text>";
    double va = i < a.size() ? a[i] : NAN, vb = i < b.size() ? b[i] : NAN;
    int k = 0;
    for (auto [v, col] : {std::pair{va, kColorA}, std::pair{vb, kColorB}}) {
      double w = std::isfinite(v) ? std::max(1.0, v / mx * pw) : 0;
      double yy = y + 3 + 12 * k;
      o << "<rect x=\"" << labelW << "\" y=\"" << yy << "\" width=\"" << fmt(w, "%.1f")
        << "\" height=\"11\" fill=\"" << col << "\"><title>" << fmt(v) << "</title></rect>";
      o << "<text class=\"value\" x=\"" << labelW + w + 4 << "\" y=\"" << yy + 9 << "\">"
        << fmt(v, "%.4g") << "</text>";
      ++k;
    }
  }
  o << "</svg>";
  return o.str();
}

// Per-rank stacked bars of forward / backward / comm / other / idle.
std::string timeChart(const RunSummary& s, int width = 900) {
  const double labelW = 200, r = 30, rowH = 22, top = 34;
  size_t n = s.time.ranks.size();
  int height = static_cast<int>(top + rowH * static_cast<double>(n) + 10);
  double mx = 0;
  for (const auto& rt : s.time.ranks) {
    mx = std::max(mx, rt.forwardMs + rt.backwardMs + rt.commMs + rt.otherMs + rt.idleMs);
  }
  if (mx <= 0) mx = 1;
  double pw = width - labelW - r;
  static const char* kCols[] = {"#16a34a", "#7c3aed", "#0891b2", "#ca8a04", "#d1d5db"};
  static const char* kNames[] = {"forward", "backward", "communication", "reduce/optimizer",
                                 "idle"};
  std::ostringstream o;
  o << "<svg class=\"chart\" viewBox=\"0 0 " << width << " " << height << "\" width=\"" << width
    << "\" height=\"" << height << "\" role=\"img\" xmlns=\"http://www.w3.org/2000/svg\">";
  double lx = labelW;
  for (int k = 0; k < 5; ++k) {
    o << "<rect x=\"" << lx << "\" y=\"8\" width=\"14\" height=\"10\" fill=\"" << kCols[k]
      << "\"/><text class=\"legend\" x=\"" << lx + 18 << "\" y=\"17\">" << kNames[k] << "</text>";
    lx += 34 + 7.2 * static_cast<double>(std::char_traits<char>::length(kNames[k]));
  }
  for (size_t i = 0; i < n; ++i) {
    const auto& rt = s.time.ranks[i];
    double y = top + rowH * static_cast<double>(i);
    o << "<text class=\"tick\" x=\"" << labelW - 8 << "\" y=\"" << y + 14
      << "\" text-anchor=\"end\">rank " << rt.rank << " " << h(rt.module) << " tp" << rt.tp << " pp"
      << rt.pp << " dp" << rt.dp << "</text>";
    double vals[] = {rt.forwardMs, rt.backwardMs, rt.commMs, rt.otherMs, rt.idleMs};
    double x = labelW;
    for (int k = 0; k < 5; ++k) {
      double w = vals[k] / mx * pw;
      if (w <= 0) continue;
      o << "<rect x=\"" << fmt(x, "%.2f") << "\" y=\"" << y + 2 << "\" width=\"" << fmt(w, "%.2f")
        << "\" height=\"" << rowH - 6 << "\" fill=\"" << kCols[k] << "\"><title>" << kNames[k]
        << ": " << fmt(vals[k], "%.3f") << " ms</title></rect>";
      x += w;
    }
  }
  o << "</svg>";
  return o.str();
}

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

}  // namespace

std::string renderHtml(const Comparison& c) {
  std::ostringstream o;
  const std::string la = c.a.label + " (" + c.a.name + ")";
  const std::string lb = c.b.label + " (" + c.b.name + ")";
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    << "<title>stagescope compare: " << h(c.a.name) << " vs " << h(c.b.name) << "</title>"
    << "<style>" << kCss << "</style></head><body><main>\n";
  o << "<h1>stagescope compare</h1><div class=\"sub\"><span class=\"a\">" << h(la)
    << "</span> vs <span class=\"b\">" << h(lb) << "</span></div>\n";
  const char* cls = c.verdict == Verdict::Identical         ? "identical"
                    : c.verdict == Verdict::WithinTolerance ? "tolerance"
                                                            : "diverged";
  o << "<div class=\"card verdict\" id=\"verdict\"><span class=\"badge " << cls << "\">"
    << h(toString(c.verdict)) << "</span><span>" << h(c.verdictReason) << "</span></div>\n";
  o << "<div class=\"card\" id=\"evidence\"><b>Evidence:</b> " << h(c.evidence)
    << "<br><b>Tolerance:</b> " << h(c.toleranceRule) << "</div>\n";
  if (!c.missing.empty()) {
    o << "<div class=\"card\" id=\"missing\"><b>Missing (why not equal):</b><ul>";
    for (const auto& m : c.missing) o << "<li>" << h(m) << "</li>";
    o << "</ul></div>\n";
  }
  o << "<h2>First divergence (causal order)</h2>\n<div class=\"card\" id=\"first-divergence\" "
    << "data-kind=\"" << (c.first ? toString(c.first->kind) : "") << "\" data-key=\""
    << h(c.first ? c.first->key : "") << "\">" << (c.first ? h(c.firstText) : "none") << "</div>\n";

  // Summary.
  o << "<h2>Summary</h2><table><tr><th></th><th class=\"a\">" << h(c.a.label)
    << "</th><th class=\"b\">" << h(c.b.label) << "</th></tr>";
  auto row = [&](const std::string& k, const std::string& x, const std::string& y) {
    o << "<tr><th>" << k << "</th><td>" << x << "</td><td>" << y << "</td></tr>";
  };
  row("run", "<code>" + h(c.a.name) + "</code>", "<code>" + h(c.b.name) + "</code>");
  row("file", "<code>" + h(c.a.path) + "</code>", "<code>" + h(c.b.path) + "</code>");
  row("status", h(c.a.status + (c.a.statusReason.empty() ? "" : ": " + c.a.statusReason)),
      h(c.b.status + (c.b.statusReason.empty() ? "" : ": " + c.b.statusReason)));
  row("layout", h(c.a.layout), h(c.b.layout));
  row("ranks", std::to_string(c.a.worldSize), std::to_string(c.b.worldSize));
  row("iterations &times; microbatches",
      std::to_string(c.a.iterations) + " &times; " + std::to_string(c.a.microbatches),
      std::to_string(c.b.iterations) + " &times; " + std::to_string(c.b.microbatches));
  row("recording level", h(c.a.level), h(c.b.level));
  row("events", std::to_string(c.a.events), std::to_string(c.b.events));
  row("config hash", "<code>" + h(c.a.configHash) + "</code>",
      "<code>" + h(c.b.configHash) + "</code>");
  row("step time (median / mean)",
      fmt(c.a.time.medianStepMs, "%.3f") + " / " + fmt(c.a.time.meanStepMs, "%.3f") + " ms",
      fmt(c.b.time.medianStepMs, "%.3f") + " / " + fmt(c.b.time.meanStepMs, "%.3f") + " ms");
  row("bubble measured vs (p&minus;1)/(m+p&minus;1)", bubbleVsExpected(c.a.time),
      bubbleVsExpected(c.b.time));
  o << "</table>\n";
  o << "<div class=\"grid2\"><div class=\"card\"><div class=\"muted\">messages compared / "
       "differing</div><div class=\"kpi\">"
    << c.transfersCompared << " / "
    << (c.transfersDiffering ? "<span class=\"bad\">" : "<span class=\"ok\">")
    << c.transfersDiffering << "</span></div><div class=\"muted\">only in " << h(c.a.label) << ": "
    << c.transfersOnlyA << ", only in " << h(c.b.label) << ": " << c.transfersOnlyB
    << "</div></div><div class=\"card\"><div class=\"muted\">max relative difference: loss / "
       "gradient norm</div><div class=\"kpi\">"
    << fmt.difference(c.maxLossRelDiff) << " / " << fmt.difference(c.maxGradRelDiff)
    << "</div><div class=\"muted\">" << c.lossesCompared << " losses, " << c.gradsCompared
    << " parameter gradients compared</div></div></div>\n";

  // First divergent transfer.
  o << "<h2>First divergent message (causal order)</h2>";
  if (!c.firstDivergent && c.transfersCompared == 0) {
    // Nothing aligned is not "nothing differs": say what could not be compared.
    o << "<div class=\"card warn\">No message was compared: " << c.transfersOnlyA << " only in "
      << h(c.a.label) << ", " << c.transfersOnlyB << " only in " << h(c.b.label) << ".</div>\n";
  } else if (!c.firstDivergent) {
    o << "<div class=\"card ok\">No message differs beyond tolerance among the "
      << c.transfersCompared << " compared"
      << (c.transfersComparable ? "." : " (checksums were not recorded: level below stats).")
      << "</div>\n";
  } else {
    const auto& d = *c.firstDivergent;
    o << "<div class=\"card\"><div><b>edge <code>" << h(d.edge) << "</code></b>, "
      << toString(d.direction) << ", iteration " << d.iteration << ", microbatch " << d.microbatch
      << ", dp replica " << d.srcDp << " &mdash; reason: <span class=\"bad\">" << h(d.reason)
      << "</span>";
    if (!std::isnan(d.relDiff)) {
      o << ", relative difference " << fmt.difference(d.relDiff) << " (max abs "
        << fmt.difference(d.maxAbsDiff) << ")";
    }
    o << "</div><table><tr><th></th><th class=\"a\">" << h(c.a.label) << "</th><th class=\"b\">"
      << h(c.b.label) << "</th></tr>";
    auto cs = [](const TransferSideInfo& s) {
      if (!s.present) return std::string("(absent)");
      std::string r;
      for (auto v : s.checksums) r += (r.empty() ? "" : "<br>") + formatChecksum(v);
      return "<code>" + r + "</code>";
    };
    auto ranks = [](const TransferSideInfo& s) {
      return s.present ? std::to_string(s.srcRank) + " &rarr; " + std::to_string(s.dstRank)
                       : std::string("&ndash;");
    };
    auto stat = [](const TransferSideInfo& s, int k) {
      if (!s.present || !s.hasStats) return std::string("&ndash;");
      const auto& st = s.stats;
      switch (k) {
        case 0:
          return analysis::formatValue(st.min);
        case 1:
          return analysis::formatValue(st.max);
        case 2:
          return analysis::formatValue(st.mean);
        case 3:
          return analysis::formatValue(st.l2);
        default:
          return std::to_string(st.nanCount) + " / " + std::to_string(st.infCount);
      }
    };
    row("ranks (src &rarr; dst)", ranks(d.a), ranks(d.b));
    row("checksum", cs(d.a), cs(d.b));
    row("shape / dtype", d.a.present ? h(formatShape(d.a.shape) + " " + d.a.dtype) : "&ndash;",
        d.b.present ? h(formatShape(d.b.shape) + " " + d.b.dtype) : "&ndash;");
    const char* names[] = {"min", "max", "mean", "l2", "NaN / Inf"};
    for (int k = 0; k < 5; ++k) row(names[k], stat(d.a, k), stat(d.b, k));
    o << "</table></div>\n";
  }

  // Losses.
  o << "<h2>Loss</h2>";
  {
    std::vector<double> ya, yb;
    std::vector<bool> noA, noB;
    for (const auto& r : c.losses) {
      ya.push_back(r.hasA ? r.a : NAN);
      yb.push_back(r.hasB ? r.b : NAN);
      noA.push_back(!r.hasA);
      noB.push_back(!r.hasB);
    }
    bool perMb = ya.size() <= 400;
    if (!perMb) {
      ya = c.iterLossA;
      yb = c.iterLossB;
      noA.clear();
      noB.clear();
      for (int k : c.iterLossCountA) noA.push_back(k == 0);
      for (int k : c.iterLossCountB) noB.push_back(k == 0);
    }
    o << "<div class=\"card\" id=\"loss-chart\">"
      << lineChart({{la, kColorA, ya, false, noA}, {lb, kColorB, yb, true, noB}},
                   perMb ? "(iteration, microbatch) in schedule order" : "iteration",
                   perMb ? "loss per microbatch" : "mean loss")
      << "</div>";
    o << "<details><summary>" << c.losses.size()
      << " loss rows (iteration, microbatch, dp replica)</summary>";
    o << "<table><tr><th class=\"num\">iteration</th><th class=\"num\">microbatch</th><th "
         "class=\"num\">dp</th><th class=\"num a\">"
      << h(c.a.label) << "</th><th class=\"num b\">" << h(c.b.label)
      << "</th><th class=\"num\">difference</th></tr>";
    size_t shown = 0;
    for (const auto& r : c.losses) {
      if (shown++ >= 64) break;
      bool differs = !(r.hasA && r.hasB) || r.a != r.b;
      o << "<tr><td class=\"num\">" << r.iteration << "</td><td class=\"num\">" << r.microbatch
        << "</td><td class=\"num\">" << (r.dp < 0 ? std::string("mean") : std::to_string(r.dp))
        << "</td><td class=\"num\">" << (r.hasA ? fmt(r.a, "%.9g") : "&ndash;")
        << "</td><td class=\"num\">" << (r.hasB ? fmt(r.b, "%.9g") : "&ndash;")
        << "</td><td class=\"num" << (differs ? " bad" : "") << "\">" << fmt.difference(r.diff)
        << "</td></tr>";
    }
    o << "</table>";
    if (c.losses.size() > 64) {
      o << "<div class=\"muted\">" << c.losses.size() - 64
        << " more rows in the JSON report.</div>";
    }
    o << "</details>";
  }

  // Gradients.
  o << "<h2>Gradient norms</h2>";
  {
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
    o << "<div class=\"card\" id=\"grad-chart\">" << barChart(labels, va, vb, la, lb) << "</div>";
    if (c.totalNormA.size() > 1 || c.totalNormB.size() > 1) {
      o << "<div class=\"card\" id=\"gradnorm-chart\">"
        << lineChart({{la, kColorA, c.totalNormA, false, nonFiniteAsAbsent(c.totalNormA)},
                      {lb, kColorB, c.totalNormB, true, nonFiniteAsAbsent(c.totalNormB)}},
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

  // Time.
  o << "<h2>Time per rank</h2>";
  {
    std::vector<double> sa = c.a.time.stepMs, sb = c.b.time.stepMs;
    if (sa.size() > 1 || sb.size() > 1) {
      o << "<div class=\"card\" id=\"step-chart\">"
        << lineChart({{la, kColorA, sa, false, nonFiniteAsAbsent(sa)},
                      {lb, kColorB, sb, true, nonFiniteAsAbsent(sb)}},
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
  if (!c.gradientRatios.empty()) {
    o << "<h2>Uniform gradient ratios</h2><div class=\"card\" id=\"ratios\"><ul>";
    for (const auto& r : c.gradientRatios) o << "<li>" << h(r) << "</li>";
    o << "</ul></div>\n";
  }

  // Schedules: the order each rank ran its actions in, run against run (never the verdict).
  o << "<h2>Schedules</h2><div class=\"card" << (c.schedule.differs() ? "" : " ok")
    << "\" id=\"schedules\">" << h(c.schedule.describe(c.a.label, c.b.label));
  if (!c.captureAgainstPlan.empty()) o << "<br>" << h(c.captureAgainstPlan);
  o << "</div>\n";

  // Config.
  o << "<h2>Configuration</h2>";
  if (c.configEqual) {
    o << "<div class=\"card ok\">The configurations are identical.</div>";
  } else {
    o << "<pre class=\"diff\">";
    for (const auto& l : c.configDiff) {
      const char* k = l.op == '+' ? "add" : l.op == '-' ? "del" : "ctx";
      o << "<span class=\"" << k << "\">" << (l.op == ' ' ? ' ' : l.op) << " " << h(l.text)
        << "</span>";
    }
    o << "</pre>";
  }
  o << "<p class=\"muted\">Generated by stagescope. Runs are aligned by logical identity (edge, "
       "direction, iteration, microbatch; parameter name with TP shards gathered), never by "
       "rank.</p>";
  o << "</main></body></html>\n";
  return o.str();
}

void writeHtml(const Comparison& c, const std::string& path) {
  writeTextFile(path, renderHtml(c));
}

}  // namespace stagescope::report
