// Plots drawn with ImDrawList: loss per iteration and microbatch, gradient norm per parameter
// over iterations, and per-rank time split with the measured vs expected bubble.
#include "ui/Plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "ui/DetailsPending.h"
#include "ui/FitText.h"
#include "ui/Formatting.h"
#include "ui/Theme.h"

namespace stagescope::ui {
namespace {

struct Axes {
  ImVec2 p0, p1;  // plot area
  double x0, x1, y0, y1;
  ImVec2 map(double x, double y) const {
    float fx = static_cast<float>((x - x0) / std::max(1e-30, x1 - x0));
    float fy = static_cast<float>((y - y0) / std::max(1e-30, y1 - y0));
    return ImVec2(p0.x + fx * (p1.x - p0.x), p1.y - fy * (p1.y - p0.y));
  }
};

Axes frameAxes(ImDrawList* dl, ImVec2 pos, ImVec2 size, const char* title, double x0, double x1,
               double y0, double y1) {
  dl->AddRectFilled(pos, ImVec2(pos.x + size.x, pos.y + size.y), theme::kPlotBackground, 3);
  dl->AddText(ImVec2(pos.x + 8, pos.y + 4), theme::kText, elideEnd(title, size.x - 16).c_str());
  Axes a{ImVec2(pos.x + 52, pos.y + 26),
         ImVec2(pos.x + size.x - 12, pos.y + size.y - 24),
         x0,
         x1,
         y0,
         y1};
  if (a.y1 <= a.y0) a.y1 = a.y0 + 1;
  if (a.x1 <= a.x0) a.x1 = a.x0 + 1;
  for (int k = 0; k <= 4; ++k) {
    double v = a.y0 + (a.y1 - a.y0) * k / 4;
    ImVec2 p = a.map(a.x0, v);
    dl->AddLine(ImVec2(a.p0.x, p.y), ImVec2(a.p1.x, p.y), theme::kPlotGrid);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    dl->AddText(ImVec2(pos.x + 4, p.y - 7), theme::kTextDim, buf);
  }
  dl->AddRect(a.p0, a.p1, theme::kGrid);
  return a;
}

// Non-finite values of one plot: a red marker on the top edge for each, never a point.
struct NonFinite {
  double x;
  bool nan;  // else an infinity
};

// The markers, and one label per run of markers whose labels would overlap ("NaN", "3 NaN",
// "2 NaN/Inf"), so that labels never run into each other.  Returns the labels' rectangles.
std::vector<ImVec4> drawNonFinite(ImDrawList* dl, const Axes& a, std::vector<NonFinite> marks) {
  std::sort(marks.begin(), marks.end(),
            [](const NonFinite& l, const NonFinite& r) { return l.x < r.x; });
  std::vector<ImVec4> labels;
  for (size_t i = 0; i < marks.size();) {
    // The run: markers closer than one label's width to the previous one.
    size_t j = i + 1;
    const float labelW = ImGui::CalcTextSize("2 NaN/Inf").x;
    while (j < marks.size() && a.map(marks[j].x, a.y1).x - a.map(marks[j - 1].x, a.y1).x < labelW)
      ++j;
    bool anyNan = false, anyInf = false;
    for (size_t k = i; k < j; ++k) {
      const ImVec2 p = a.map(marks[k].x, a.y1);
      dl->AddTriangleFilled(ImVec2(p.x - 6, p.y + 1), ImVec2(p.x + 6, p.y + 1),
                            ImVec2(p.x, p.y + 11), theme::kBad);
      (marks[k].nan ? anyNan : anyInf) = true;
    }
    std::string text = anyNan && anyInf ? "NaN/Inf" : anyNan ? "NaN" : "Inf";
    if (j - i > 1) text = std::to_string(j - i) + " " + text;
    const float x0 = a.map(marks[i].x, a.y1).x, x1 = a.map(marks[j - 1].x, a.y1).x;
    const ImVec2 size = ImGui::CalcTextSize(text.c_str());
    const ImVec2 at((x0 + x1) / 2 - size.x / 2, a.p0.y + 12);
    dl->AddText(at, theme::kBad, text.c_str());
    labels.emplace_back(at.x, at.y, at.x + size.x, at.y + size.y);
    i = j;
  }
  return labels;
}

// Where a microbatch's loss dot sits within its iteration.
double microbatchX(const events::LossRecord& l, int microbatches) {
  return l.iteration - 0.3 + 0.6 * (l.microbatch + 0.5) / microbatches;
}

// The loss plot's dots (microbatches) and line (per-iteration mean of dp 0); non-finite losses
// as markers.  Returns the markers' label rectangles.
std::vector<ImVec4> drawLossPoints(ImDrawList* dl, const Axes& a, const model::RunModel& model) {
  const int m = std::max(1, model.info.microbatches);
  ImVec2 prev(-1, -1);
  std::vector<NonFinite> marks;
  for (const auto& l : model.losses) {
    if (!std::isfinite(l.loss)) {  // a marker at the top edge, never a value
      marks.push_back({l.microbatch < 0 ? l.iteration : microbatchX(l, m), std::isnan(l.loss)});
      if (l.microbatch < 0 && l.dp == 0) prev = ImVec2(-1, -1);
      continue;
    }
    if (l.microbatch < 0) {
      ImVec2 p = a.map(l.iteration, l.loss);
      if (prev.x >= 0 && l.dp == 0) dl->AddLine(prev, p, theme::kGood, 2);
      if (l.dp == 0) prev = p;
      dl->AddCircleFilled(p, 4, theme::kGood);
    } else {
      dl->AddCircleFilled(a.map(microbatchX(l, m), l.loss), 2.5f,
                          theme::moduleColour(1, false, 0.8f));
    }
  }
  return drawNonFinite(dl, a, std::move(marks));
}

// 1. Loss per iteration and microbatch.  Returns the non-finite markers' label rectangles.
std::vector<ImVec4> drawLossPlot(ImDrawList* dl, const model::RunModel& model, ImVec2 pos,
                                 ImVec2 size) {
  double lo = 1e300, hi = -1e300;
  int iters = std::max(1, model.info.iterations);
  for (const auto& l : model.losses)
    if (std::isfinite(l.loss)) lo = std::min(lo, l.loss), hi = std::max(hi, l.loss);
  if (lo > hi) lo = 0, hi = 1;
  double pad = (hi - lo) * 0.1 + 1e-9;
  Axes a = frameAxes(dl, pos, size, "Loss per iteration (line: mean, dots: microbatches)", -0.5,
                     iters - 0.5, lo - pad, hi + pad);
  std::vector<ImVec4> labels = drawLossPoints(dl, a, model);
  for (int i = 0; i < iters; ++i) {
    char b[16];
    std::snprintf(b, sizeof b, "it%d", i);
    ImVec2 p = a.map(i, a.y0);
    if (iters <= 30 || i % (iters / 10 + 1) == 0)
      dl->AddText(ImVec2(p.x - 8, p.y + 4), theme::kTextDim, b);
  }
  return labels;
}

// The norm of the full parameter `param` per iteration (reduced, dp 0): the root of the summed
// squares of its partitions' norms, each partition counted once.
std::vector<double> gradientNorms(const model::RunModel& model, const std::string* param) {
  std::vector<double> sq(std::max(1, model.info.iterations), 0.0);
  std::vector<std::vector<int64_t>> seenPer(sq.size());
  for (const auto& g : model.gradients) {
    if (!param || g.phase != events::GradPhase::Reduced || g.dp != 0 || g.param != *param) continue;
    if (g.iteration < 0 || g.iteration >= static_cast<int>(sq.size())) continue;
    auto& s = seenPer[g.iteration];
    if (std::find(s.begin(), s.end(), g.partitionOffset) != s.end()) continue;
    s.push_back(g.partitionOffset);
    sq[g.iteration] += g.norm * g.norm;
  }
  for (double& v : sq) v = std::sqrt(v);
  return sq;
}

// 2. Gradient norms per iteration.  Returns the non-finite markers' label rectangles.
std::vector<ImVec4> drawGradientPlot(ImDrawList* dl, const std::vector<double>& norms, ImVec2 pos,
                                     ImVec2 size) {
  double hi = 0;
  for (double v : norms)
    if (std::isfinite(v)) hi = std::max(hi, v);
  Axes a = frameAxes(dl, pos, size, "Gradient norm (reduced, full parameter)", -0.5,
                     static_cast<double>(norms.size()) - 0.5, 0, hi * 1.15 + 1e-12);
  std::vector<NonFinite> marks;
  for (size_t i = 0; i < norms.size(); ++i) {
    if (!std::isfinite(norms[i])) {
      marks.push_back({static_cast<double>(i), std::isnan(norms[i])});
      continue;
    }
    ImVec2 q = a.map(static_cast<double>(i), norms[i]);
    if (i && std::isfinite(norms[i - 1]))
      dl->AddLine(a.map(static_cast<double>(i - 1), norms[i - 1]), q, theme::kGradient, 2);
    dl->AddCircleFilled(q, 3.5f, theme::kGradient);
  }
  return drawNonFinite(dl, a, std::move(marks));
}

// The gradient plot's parameter chooser.
void parameterCombo(const std::vector<std::string>& params, int* selected, ImVec2 at, float width) {
  ImGui::SetCursorScreenPos(at);
  ImGui::SetNextItemWidth(width);
  const char* preview = params.empty() ? "(no gradients recorded)" : params[*selected].c_str();
  if (ImGui::BeginCombo("##param", preview)) {
    for (size_t i = 0; i < params.size(); ++i)
      if (ImGui::Selectable(params[i].c_str(), static_cast<int>(i) == *selected))
        *selected = static_cast<int>(i);
    ImGui::EndCombo();
  }
}

// The time plot's horizontal extent: labels left of x0, bubble shares right of x1.
struct TimeBars {
  float x0, x1, barH;
};

// One rank's bar: compute, communication, idle; its label, its bubble and its tooltip.
void drawRankBar(ImDrawList* dl, const TimeBars& b, float labelX, float y, const RankRow& row,
                 const analysis::RankTime& t, double expectedBubble) {
  const double compute = t.forwardMs + t.backwardMs + t.otherMs;
  const double span = std::max(1e-9, t.spanMs);
  const float x0 = b.x0, x1 = b.x1, barH = b.barH;
  float xc = x0 + (x1 - x0) * static_cast<float>(std::min(1.0, compute / span));
  float xm = std::min(x1, xc + (x1 - x0) * static_cast<float>(t.commMs / span));
  dl->AddRectFilled(ImVec2(x0, y), ImVec2(xc, y + barH),
                    theme::moduleColour(row.moduleIndex, false));
  dl->AddRectFilled(ImVec2(xc, y), ImVec2(xm, y + barH), theme::kCommunication);
  dl->AddRectFilled(ImVec2(xm, y), ImVec2(x1, y + barH), theme::kIdle);
  char text[32];
  std::snprintf(text, sizeof text, "r%d", row.rank);
  if (barH >= 10) dl->AddText(ImVec2(labelX, y + barH / 2 - 7), theme::kTextDim, text);
  std::snprintf(text, sizeof text, "%.0f%%", 100 * t.bubble);
  if (barH >= 10) dl->AddText(ImVec2(x1 + 6, y + barH / 2 - 7), theme::kTextDim, text);
  if (ImGui::IsMouseHoveringRect(ImVec2(x0, y), ImVec2(x1, y + barH)))
    ImGui::SetTooltip(
        "rank %d\ncompute %s\ncommunication %s\nidle %s\nbubble %.1f %% (expected %.1f %%)",
        row.rank, formatDuration(compute * 1e6).c_str(), formatDuration(t.commMs * 1e6).c_str(),
        formatDuration(t.idleMs * 1e6).c_str(), 100 * t.bubble, 100 * expectedBubble);
}

// The time plot's legend along its bottom edge.
void drawTimeLegend(ImDrawList* dl, const TimeBars& b, float ly) {
  float lx = b.x0;
  auto legend = [&](ImU32 c, const char* text) {
    dl->AddRectFilled(ImVec2(lx, ly), ImVec2(lx + 10, ly + 10), c);
    dl->AddText(ImVec2(lx + 14, ly - 3), theme::kTextDim, text);
    lx += 24 + ImGui::CalcTextSize(text).x;
  };
  legend(theme::moduleColour(0, false), "compute");
  legend(theme::kCommunication, "communication");
  legend(theme::kIdle, "idle");
  dl->AddText(ImVec2(b.x1 + 2, ly - 3), theme::kTextDim, "bubble");
}

// 3. Time per rank (analysis::timeBreakdown: the accounting `compare` reports).
void drawTimePlot(ImDrawList* dl, const LoadedRun& run, ImVec2 p, ImVec2 size) {
  const analysis::TimeBreakdown& tb = run.time;
  const float w = size.x, h = size.y;
  dl->AddRectFilled(p, ImVec2(p.x + w, p.y + h), theme::kPlotBackground, 3);
  char title[160];
  std::snprintf(title, sizeof title, "Time per rank  bubble %.1f %%, expected %.1f %% (p=%d, m=%d)",
                100 * tb.measuredBubble, 100 * tb.expectedBubble, tb.stages, tb.microbatches);
  dl->AddText(ImVec2(p.x + 8, p.y + 4), theme::kText, elideEnd(title, w - 16).c_str());
  const float top = p.y + 26, bottom = p.y + h - 22;
  const size_t n = run.rows.size();
  const TimeBars bars{p.x + 64, p.x + w - 60,
                      std::max(3.0f, std::min(16.0f, (bottom - top) / std::max<size_t>(1, n) - 2))};
  for (size_t i = 0; i < n; ++i) {
    const int rank = run.rows[i].rank;
    const analysis::RankTime* found = nullptr;
    for (const auto& rt : tb.ranks)
      if (rt.rank == rank) found = &rt;
    if (!found) continue;
    float y = top + static_cast<float>(i) * (bars.barH + 2);
    if (y + bars.barH > bottom) break;
    drawRankBar(dl, bars, p.x + 8, y, run.rows[i], *found, tb.expectedBubble);
  }
  drawTimeLegend(dl, bars, p.y + h - 18);
}

}  // namespace

void Plots::draw(PanelContext& p) {
  const LoadedRun* run = p.main.run.get();
  if (!run) {
    ImGui::TextDisabled("No run open.");
    return;
  }
  if (drawDetailsPending(p, "plots")) return;  // losses and gradients are details
  const auto& model = run->model;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float w = (avail.x - 20) / 3, h = avail.y - 6;
  if (drawnFor_ != run) {
    drawnFor_ = run;
    params_.clear();
    std::map<std::string, int> seen;
    for (const auto& g : model.gradients)
      if (g.phase == events::GradPhase::Reduced && seen.emplace(g.param, 0).second)
        params_.push_back(g.param);
    p.view.plotParam =
        std::clamp(p.view.plotParam, 0, std::max(0, static_cast<int>(params_.size()) - 1));
  }
  p.probes.plotLabels = drawLossPlot(dl, model, origin, ImVec2(w, h));
  const ImVec2 gradientAt(origin.x + w + 10, origin.y);
  const std::string* param = params_.empty() ? nullptr : &params_[p.view.plotParam];
  for (const ImVec4& r :
       drawGradientPlot(dl, gradientNorms(model, param), gradientAt, ImVec2(w, h)))
    p.probes.plotLabels.push_back(r);
  parameterCombo(params_, &p.view.plotParam, ImVec2(gradientAt.x + 56, gradientAt.y + h - 22),
                 w - 70);
  drawTimePlot(dl, *run, ImVec2(origin.x + 2 * (w + 10), origin.y), ImVec2(w, h));
  ImGui::SetCursorScreenPos(origin);
  ImGui::Dummy(ImVec2(1, 1));
}

}  // namespace stagescope::ui
