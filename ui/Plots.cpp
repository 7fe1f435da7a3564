// Plots drawn with ImDrawList: loss per iteration and microbatch, gradient norm per parameter
// over iterations, and per-rank time split with the measured vs expected bubble.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "ui/App.h"

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
  dl->AddText(ImVec2(pos.x + 8, pos.y + 4), theme::kText, title);
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

// A non-finite value: a red marker on the plot's top edge with its name, never a point.
void nonFiniteMarker(ImDrawList* dl, const Axes& a, double x, const char* what) {
  ImVec2 p = a.map(x, a.y1);
  dl->AddTriangleFilled(ImVec2(p.x - 6, p.y + 1), ImVec2(p.x + 6, p.y + 1), ImVec2(p.x, p.y + 11),
                        theme::kBad);
  dl->AddText(ImVec2(p.x - 10, p.y + 12), theme::kBad, what);
}

}  // namespace

void App::drawPlots() {
  const LoadedRun* run = main_.run.get();
  if (!run) {
    ImGui::TextDisabled("No run open.");
    return;
  }
  if (drawDetailsPending("plots")) return;  // losses and gradients are details
  const auto& model = run->model;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float w = (avail.x - 20) / 3, h = avail.y - 6;
  if (plotsFor_ != run) {
    plotsFor_ = run;
    plotParams_.clear();
    std::map<std::string, int> seen;
    for (const auto& g : model.gradients)
      if (g.phase == events::GradPhase::Reduced && seen.emplace(g.param, 0).second)
        plotParams_.push_back(g.param);
    view_.plotParam =
        std::clamp(view_.plotParam, 0, std::max(0, static_cast<int>(plotParams_.size()) - 1));
  }

  // 1. Loss.
  {
    double lo = 1e300, hi = -1e300;
    int iters = std::max(1, model.info.iterations);
    for (const auto& l : model.losses)
      if (std::isfinite(l.loss)) lo = std::min(lo, l.loss), hi = std::max(hi, l.loss);
    if (lo > hi) lo = 0, hi = 1;
    double pad = (hi - lo) * 0.1 + 1e-9;
    Axes a =
        frameAxes(dl, origin, ImVec2(w, h), "Loss per iteration (line: mean, dots: microbatches)",
                  -0.5, iters - 0.5, lo - pad, hi + pad);
    const int m = std::max(1, model.info.microbatches);
    ImVec2 prev(-1, -1);
    for (const auto& l : model.losses) {
      if (!std::isfinite(l.loss)) {  // a marker at the top edge, never a value
        double x =
            l.microbatch < 0 ? l.iteration : l.iteration - 0.3 + 0.6 * (l.microbatch + 0.5) / m;
        nonFiniteMarker(dl, a, x, std::isnan(l.loss) ? "NaN" : "Inf");
        if (l.microbatch < 0 && l.dp == 0) prev = ImVec2(-1, -1);
        continue;
      }
      if (l.microbatch < 0) {
        ImVec2 p = a.map(l.iteration, l.loss);
        if (prev.x >= 0 && l.dp == 0) dl->AddLine(prev, p, theme::kGood, 2);
        if (l.dp == 0) prev = p;
        dl->AddCircleFilled(p, 4, theme::kGood);
      } else {
        double x = l.iteration - 0.3 + 0.6 * (l.microbatch + 0.5) / m;
        dl->AddCircleFilled(a.map(x, l.loss), 2.5f, theme::moduleColour(1, false, 0.8f));
      }
    }
    for (int i = 0; i < iters; ++i) {
      char b[16];
      std::snprintf(b, sizeof b, "it%d", i);
      ImVec2 p = a.map(i, a.y0);
      if (iters <= 30 || i % (iters / 10 + 1) == 0)
        dl->AddText(ImVec2(p.x - 8, p.y + 4), theme::kTextDim, b);
    }
  }
  // 2. Gradient norms per parameter over iterations.
  {
    ImVec2 p(origin.x + w + 10, origin.y);
    std::vector<double> norms(std::max(1, model.info.iterations), 0.0);
    std::vector<int64_t> offsetsSeen;
    double hi = 0;
    const std::string* param = plotParams_.empty() ? nullptr : &plotParams_[view_.plotParam];
    std::vector<double> sq(norms.size(), 0.0);
    std::vector<std::vector<int64_t>> seenPer(norms.size());
    for (const auto& g : model.gradients) {
      if (!param || g.phase != events::GradPhase::Reduced || g.dp != 0 || g.param != *param)
        continue;
      if (g.iteration < 0 || g.iteration >= static_cast<int>(sq.size())) continue;
      auto& s = seenPer[g.iteration];
      if (std::find(s.begin(), s.end(), g.partitionOffset) != s.end()) continue;
      s.push_back(g.partitionOffset);
      sq[g.iteration] += g.norm * g.norm;
    }
    for (size_t i = 0; i < sq.size(); ++i)
      if (std::isfinite(norms[i] = std::sqrt(sq[i]))) hi = std::max(hi, norms[i]);
    Axes a = frameAxes(dl, p, ImVec2(w, h), "Gradient norm (reduced, full parameter)", -0.5,
                       static_cast<double>(norms.size()) - 0.5, 0, hi * 1.15 + 1e-12);
    for (size_t i = 0; i < norms.size(); ++i) {
      if (!std::isfinite(norms[i])) {
        nonFiniteMarker(dl, a, static_cast<double>(i), std::isnan(norms[i]) ? "NaN" : "Inf");
        continue;
      }
      ImVec2 q = a.map(static_cast<double>(i), norms[i]);
      if (i && std::isfinite(norms[i - 1]))
        dl->AddLine(a.map(static_cast<double>(i - 1), norms[i - 1]), q,
                    theme::kGradient, 2);
      dl->AddCircleFilled(q, 3.5f, theme::kGradient);
    }
    ImGui::SetCursorScreenPos(ImVec2(p.x + 56, p.y + h - 22));
    ImGui::SetNextItemWidth(w - 70);
    if (ImGui::BeginCombo("##param", param ? param->c_str() : "(no gradients recorded)")) {
      for (size_t i = 0; i < plotParams_.size(); ++i)
        if (ImGui::Selectable(plotParams_[i].c_str(), static_cast<int>(i) == view_.plotParam))
          view_.plotParam = static_cast<int>(i);
      ImGui::EndCombo();
    }
  }
  // 3. Time per rank (analysis::timeBreakdown: the accounting `compare` reports).
  {
    const analysis::TimeBreakdown& tb = run->time;
    ImVec2 p(origin.x + 2 * (w + 10), origin.y);
    dl->AddRectFilled(p, ImVec2(p.x + w, p.y + h), theme::kPlotBackground, 3);
    char title[160];
    std::snprintf(title, sizeof title,
                  "Time per rank   bubble: measured %.1f %%  expected %.1f %% (p=%d, m=%d)",
                  100 * tb.measuredBubble, 100 * tb.expectedBubble, tb.stages, tb.microbatches);
    dl->AddText(ImVec2(p.x + 8, p.y + 4), theme::kText, title);
    const float top = p.y + 26, bottom = p.y + h - 22;
    const size_t n = run->rows.size();
    const float barH = std::max(3.0f, std::min(16.0f, (bottom - top) / std::max<size_t>(1, n) - 2));
    const float x0 = p.x + 64, x1 = p.x + w - 60;
    for (size_t i = 0; i < n; ++i) {
      const int rank = run->rows[i].rank;
      const analysis::RankTime* found = nullptr;
      for (const auto& rt : tb.ranks)
        if (rt.rank == rank) found = &rt;
      if (!found) continue;
      const analysis::RankTime& t = *found;
      float y = top + static_cast<float>(i) * (barH + 2);
      if (y + barH > bottom) break;
      const double compute = t.forwardMs + t.backwardMs + t.otherMs;
      const double span = std::max(1e-9, t.spanMs);
      float xc = x0 + (x1 - x0) * static_cast<float>(std::min(1.0, compute / span));
      float xm = std::min(x1, xc + (x1 - x0) * static_cast<float>(t.commMs / span));
      dl->AddRectFilled(ImVec2(x0, y), ImVec2(xc, y + barH),
                        theme::moduleColour(run->rows[i].moduleIndex, false));
      dl->AddRectFilled(ImVec2(xc, y), ImVec2(xm, y + barH), theme::kCommunication);
      dl->AddRectFilled(ImVec2(xm, y), ImVec2(x1, y + barH), theme::kIdle);
      char b[32];
      std::snprintf(b, sizeof b, "r%d", rank);
      if (barH >= 10) dl->AddText(ImVec2(p.x + 8, y + barH / 2 - 7), theme::kTextDim, b);
      std::snprintf(b, sizeof b, "%.0f%%", 100 * t.bubble);
      if (barH >= 10) dl->AddText(ImVec2(x1 + 6, y + barH / 2 - 7), theme::kTextDim, b);
      if (ImGui::IsMouseHoveringRect(ImVec2(x0, y), ImVec2(x1, y + barH)))
        ImGui::SetTooltip(
            "rank %d\ncompute %s\ncommunication %s\nidle %s\nbubble %.1f %% (expected %.1f %%)",
            rank, formatDuration(compute * 1e6).c_str(), formatDuration(t.commMs * 1e6).c_str(),
            formatDuration(t.idleMs * 1e6).c_str(), 100 * t.bubble, 100 * tb.expectedBubble);
    }
    float ly = p.y + h - 18, lx = x0;
    auto legend = [&](ImU32 c, const char* text) {
      dl->AddRectFilled(ImVec2(lx, ly), ImVec2(lx + 10, ly + 10), c);
      dl->AddText(ImVec2(lx + 14, ly - 3), theme::kTextDim, text);
      lx += 24 + ImGui::CalcTextSize(text).x;
    };
    legend(theme::moduleColour(0, false), "compute");
    legend(theme::kCommunication, "communication");
    legend(theme::kIdle, "idle");
    dl->AddText(ImVec2(x1 + 2, ly - 3), theme::kTextDim, "bubble");
  }
  ImGui::SetCursorScreenPos(origin);
  ImGui::Dummy(ImVec2(1, 1));
}

}  // namespace stagescope::ui
