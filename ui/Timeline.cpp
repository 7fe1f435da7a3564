// The timeline: one row per rank, actions, transfer arrows, plan overlay, replay state.
// Timeline::draw lays the frame out once (TimelineContext.h: the area, the scale, the rows'
// positions, the mouse), handles the input, and hands the context to one painter per layer,
// each in the file named after its layer; it picks the hover among the painters' candidates
// and shows its tooltip.  This file: the composition, the layout, the input, the ruler.
#include "ui/Timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ui/CapturedPlanLayer.h"
#include "ui/CollectiveLayer.h"
#include "ui/Formatting.h"
#include "ui/IterationLinesLayer.h"
#include "ui/RowsLayer.h"
#include "ui/StuckLayer.h"
#include "ui/Theme.h"
#include "ui/TimelineContext.h"
#include "ui/TooltipLayer.h"
#include "ui/TransfersLayer.h"

namespace stagescope::ui {
namespace {

// The ruler above the rows (from p0 to p1): time labels from the run's start, iteration
// markers and labels.
void drawTimeRuler(const TimelineContext& ctx, const ImVec2& p0, const ImVec2& p1) {
  ImDrawList* dl = ctx.dl;
  const double nsPerPx = ctx.nsPerPx;
  dl->AddRectFilled(p0, p1, theme::kBarBackground);
  dl->AddLine(ImVec2(p0.x, p1.y - 1), ImVec2(p1.x, p1.y - 1), theme::kGrid);
  const double raw = nsPerPx * 110;
  double mag = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
  double step = mag;
  if (raw / mag > 5)
    step = mag * 10;
  else if (raw / mag > 2)
    step = mag * 5;
  else if (raw / mag > 1)
    step = mag * 2;
  const double base = static_cast<double>(ctx.run->model.minTimeNs);
  const double first = std::floor((ctx.view->viewStart - base) / step) * step;
  for (double t = first; base + t <= ctx.view->viewEnd; t += step) {
    float x = static_cast<float>(p0.x + (base + t - ctx.view->viewStart) / nsPerPx);
    for (int k = 1; k < 5; ++k) {
      float xm = x + static_cast<float>(k * step / 5 / nsPerPx);
      if (xm >= p0.x && xm <= p1.x)
        dl->AddLine(ImVec2(xm, p1.y - 5), ImVec2(xm, p1.y), theme::kGrid);
    }
    if (x < p0.x - 1) continue;
    dl->AddLine(ImVec2(x, p1.y - 11), ImVec2(x, p1.y), theme::kTextDim);
    std::string label = formatDuration(t);
    dl->AddText(ImVec2(x + 3, p0.y + 3), theme::kTextDim, label.c_str());
  }
  // Iteration markers (the lines across the rows are the iteration lines layer's).
  const auto& starts = ctx.run->iterationStartNs;
  float lastLabel = -1e9f;
  for (size_t it = 0; it < starts.size(); ++it) {
    if (starts[it] == INT64_MAX) continue;
    const float x = static_cast<float>(
        p0.x + (static_cast<double>(starts[it]) - ctx.view->viewStart) / nsPerPx);
    if (x < p0.x || x > p1.x) continue;
    dl->AddTriangleFilled(ImVec2(x - 5, p0.y), ImVec2(x + 5, p0.y), ImVec2(x, p0.y + 7),
                          theme::kIterationMarker);
    if (x - lastLabel < 44) continue;  // labels would overlap: the marker alone
    char buf[24];
    std::snprintf(buf, sizeof buf, "it %zu", it);
    const ImVec2 ts = ImGui::CalcTextSize(buf);
    dl->AddRectFilled(ImVec2(x + 1, p1.y - ts.y - 3), ImVec2(x + ts.x + 7, p1.y - 1),
                      theme::kIterationLabel, 2);
    dl->AddText(ImVec2(x + 4, p1.y - ts.y - 2), theme::kIterationLabelText, buf);
    lastLabel = x;
  }
}

}  // namespace

TimelineContext Timeline::layout(PanelContext& p, ImDrawList* dl, const ImVec2& pos,
                                 const ImVec2& size) {
  TimelineContext ctx;
  ctx.dl = dl;
  ctx.run = p.main.run.get();
  ctx.view = &p.view;
  ctx.probes = &p.probes;
  ctx.pos = pos;
  ctx.size = size;
  ctx.area0 = ImVec2(pos.x + kTimelineLabelWidth, pos.y + kTimelineRulerHeight);
  ctx.area1 = ImVec2(pos.x + size.x, pos.y + size.y);
  ctx.areaW = std::max(10.0f, ctx.area1.x - ctx.area0.x);
  ctx.nsPerPx = (p.view.viewEnd - p.view.viewStart) / ctx.areaW;
  ctx.step = p.view.step;
  const auto& rows = ctx.run->rows;
  // Rows grow to fill the panel (up to 40 px per lane) when there are few of them.
  int modulesShown = 0, lanes = 0;
  for (const auto& r : rows) {
    modulesShown += r.firstOfModule ? 1 : 0;
    lanes += r.laneCount();
  }
  const float fill =
      (ctx.area1.y - ctx.area0.y - static_cast<float>(modulesShown) * kTimelineHeaderHeight - 4) /
      std::max<float>(1.0f, static_cast<float>(lanes));
  ctx.rowH = std::clamp(fill, p.view.rowHeight, std::max(p.view.rowHeight, 40.0f));
  // Row positions.
  ctx.rowY.resize(rows.size());
  float contentH = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].firstOfModule) contentH += kTimelineHeaderHeight;
    ctx.rowY[i] = contentH;
    contentH += ctx.heightOf(i);
  }
  p.view.scrollY =
      std::clamp(p.view.scrollY, 0.0f, std::max(0.0f, contentH - (ctx.area1.y - ctx.area0.y) + 8));
  for (float& y : ctx.rowY) y += ctx.area0.y - p.view.scrollY;
  return ctx;
}

bool Timeline::input(PanelContext& p, TimelineContext& ctx) {
  ImGuiIO& io = ImGui::GetIO();
  ImGui::SetCursorScreenPos(ImVec2(ctx.pos.x, ctx.area0.y));
  ImGui::InvisibleButton("##tlinput", ImVec2(ctx.size.x, std::max(1.0f, ctx.area1.y - ctx.area0.y)),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight |
                             ImGuiButtonFlags_MouseButtonMiddle);
  ctx.hovered = ImGui::IsItemHovered();
  ctx.mouse = io.MousePos;
  ctx.mouseT = p.view.viewStart + (ctx.mouse.x - ctx.area0.x) * ctx.nsPerPx;
  const double mouseT = ctx.mouseT;
  if (ctx.hovered && io.MouseWheel != 0) {
    if (io.KeyShift) {
      p.view.scrollY -= io.MouseWheel * ctx.rowH * 2;
    } else {
      double f = std::pow(0.8, io.MouseWheel);
      double anchor = ctx.mouse.x >= ctx.area0.x ? mouseT : p.view.viewStart;
      p.nav.zoomTo(anchor - (anchor - p.view.viewStart) * f,
                   anchor + (p.view.viewEnd - anchor) * f);
      ctx.nsPerPx = (p.view.viewEnd - p.view.viewStart) / ctx.areaW;
    }
  }
  if (ImGui::IsItemActive() && (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3) ||
                                ImGui::IsMouseDragging(ImGuiMouseButton_Middle, 3))) {
    p.view.viewStart -= io.MouseDelta.x * ctx.nsPerPx;
    p.view.viewEnd -= io.MouseDelta.x * ctx.nsPerPx;
    p.view.scrollY -= io.MouseDelta.y;
  }
  if (ctx.hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
    range_.active = true;
    range_.startNs = mouseT;
  }
  const ImVec2 drag = ImGui::GetMouseDragDelta(ImGuiMouseButton_Left, 0);
  const bool clicked = ImGui::IsItemDeactivated() &&
                       ImGui::IsMouseReleased(ImGuiMouseButton_Left) &&
                       drag.x * drag.x + drag.y * drag.y < 9;
  if (range_.active && !ImGui::IsMouseDown(ImGuiMouseButton_Right)) {
    range_.active = false;
    if (std::fabs(mouseT - range_.startNs) > 4 * ctx.nsPerPx)
      p.nav.zoomTo(std::min(mouseT, range_.startNs), std::max(mouseT, range_.startNs));
  }
  ctx.nsPerPx = (p.view.viewEnd - p.view.viewStart) / ctx.areaW;
  ctx.viewStart = p.view.viewStart;
  ctx.viewEnd = p.view.viewEnd;
  ctx.vStart = static_cast<int64_t>(p.view.viewStart);
  ctx.vEnd = static_cast<int64_t>(std::ceil(p.view.viewEnd));
  return clicked;
}

TimelineHover Timeline::drawLayers(const TimelineContext& ctx) {
  TimelineHover hover;
  int stuckRank = -1;
  StuckRects stuck(ctx.model().actions.size(), ImVec4(0, 0, -1, -1));
  // Row by row: its actions, what it never completed, its replay cursor.
  for (size_t i = 0; i < ctx.run->rows.size(); ++i) {
    if (!ctx.rowVisible(i)) continue;
    const RankReplayState st = ctx.run->replay.stateAt(ctx.run->rows[i].rank, ctx.step);
    const TimelineHover onAction = actions_.drawRow(ctx, i, st);
    if (onAction.what.kind != Selection::Kind::None) hover = onAction;
    const Selection onStuck = drawStuck(ctx, i, st, stuck);
    if (onStuck.kind != Selection::Kind::None) hover.what = onStuck, stuckRank = onStuck.rank;
    drawReplayCursor(ctx, i, st);
  }
  const Selection onArrow = ctx.view->showArrows ? drawArrows(ctx) : Selection{};
  // A collective's band not on a member's bar takes the rank of what lies under it.
  const Selection onCollective = drawCollectives(ctx);
  if (onCollective.kind != Selection::Kind::None)
    hover.what = {onCollective.kind, onCollective.rank >= 0 ? onCollective.rank : hover.what.rank,
                  onCollective.index};
  if (ctx.view->showPlan) drawCapturedPlan(ctx);
  drawWaits(ctx, stuck);
  // An arrow is the hover only where nothing else is.
  if (hover.what.kind == Selection::Kind::None) hover.what = onArrow;
  hover.stuckRank = stuckRank;
  return hover;
}

void Timeline::draw(PanelContext& p, ImDrawList* dl, const ImVec2& pos, const ImVec2& size) {
  if (p.view.fitPending) p.nav.zoomOpening();
  TimelineContext ctx = layout(p, dl, pos, size);
  const bool clicked = input(p, ctx);
  const ImVec2 area0 = ctx.area0, area1 = ctx.area1;

  dl->PushClipRect(ImVec2(pos.x, area0.y), area1, true);
  drawRowBackgrounds(ctx);
  drawIterationLines(ctx);
  dl->PushClipRect(area0, area1, true);
  const TimelineHover hover = drawLayers(ctx);
  drawTimeCursors(ctx, range_);
  dl->PopClipRect();
  drawRowLabels(ctx);
  dl->AddLine(ImVec2(area0.x - 1, area0.y), ImVec2(area0.x - 1, area1.y), theme::kGrid);
  dl->PopClipRect();
  drawTimeRuler(ctx, ImVec2(area0.x, pos.y), ImVec2(area1.x, area0.y));
  dl->AddRectFilled(pos, ImVec2(area0.x, area0.y), theme::kBarBackground);
  {
    char buf[96];
    std::snprintf(buf, sizeof buf, "view %s",
                  formatDuration(p.view.viewEnd - p.view.viewStart).c_str());
    dl->AddText(ImVec2(pos.x + 8, pos.y + 4), theme::kTextDim, buf);
  }

  // Tooltip and click.
  p.view.hovered = hover.what;
  drawTimelineTooltip(ctx, hover);
  if (clicked) {
    if (hover.what.kind != Selection::Kind::None && !hover.folded)
      p.nav.select(hover.what, false);
    else if (hover.folded)
      p.nav.zoomTo(static_cast<double>(hover.foldStart), static_cast<double>(hover.foldEnd));
    else
      p.view.selection = {};
  }
}

}  // namespace stagescope::ui
