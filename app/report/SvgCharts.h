// The SVG charts of the HTML comparison report: each an inline <svg class="chart"> element
// (no script, no external reference) sized by its viewBox, drawn in the page's CSS classes
// (grid, axis, tick, label, legend, value, muted).  A non-finite value is never plotted as a
// number.
#pragma once

#include <string>
#include <vector>

#include "core/analysis/Compare.h"

namespace stagescope::report {

// The colours of run A and run B in every chart (the page's CSS .a and .b say the same).
inline constexpr const char* kColorA = "#2563eb";
inline constexpr const char* kColorB = "#ea580c";

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
std::vector<bool> nonFiniteAsAbsent(const std::vector<double>& y);

// A line chart of the series over x = 0..n-1 in a width x height viewBox (px); a series longer
// than about two points a pixel is decimated; "no data" when nothing is finite or recorded.
std::string lineChart(const std::vector<Series>& series, const std::string& xLabel,
                      const std::string& yLabel, int width = 900, int height = 300);

// Horizontal grouped bars: one group per label, one bar per run (`a` and `b`, named `la` and
// `lb` in the legend); a label past 44 characters shows its end, the whole in a tooltip.
std::string barChart(const std::vector<std::string>& labels, const std::vector<double>& a,
                     const std::vector<double>& b, const std::string& la, const std::string& lb,
                     int width = 900);

// A run's time per rank (ms) as stacked bars: forward, backward, communication,
// reduce/optimizer, idle.
std::string timeChart(const analysis::RunSummary& s, int width = 900);

}  // namespace stagescope::report
