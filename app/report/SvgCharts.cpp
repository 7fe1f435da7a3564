// The SVG charts of the HTML comparison report (SvgCharts.h).
#include "app/report/SvgCharts.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "app/report/Escape.h"
#include "app/report/ReportFormat.h"

namespace stagescope::report {

using analysis::RunSummary;

namespace {

constexpr const NumberFormat& fmt = kHtmlNumbers;  // a NaN reads "&ndash;"

std::string h(const std::string& s) {
  return xmlEscape(s);
}

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

}  // namespace

// Every non-finite position of `y` as absent: for series that do not tell a recorded NaN from a
// missing value (a plain gap, as before).
std::vector<bool> nonFiniteAsAbsent(const std::vector<double>& y) {
  std::vector<bool> out;
  for (double v : y) out.push_back(!std::isfinite(v));
  return out;
}

// A line chart over x = 0..n-1.
std::string lineChart(const std::vector<Series>& series, const std::string& xLabel,
                      const std::string& yLabel, int width, int height) {
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
                     int width) {
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
std::string timeChart(const RunSummary& s, int width) {
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

}  // namespace stagescope::report
