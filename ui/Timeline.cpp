// The timeline: one row per rank, actions, transfer arrows, plan overlay, replay state.
// drawTimeline lays the frame out once (TimelineContext.h: the area, the scale, the rows'
// positions, the mouse), handles the input, and hands the context to one painter per layer,
// each in the file named after its layer; it picks the hover among the painters' candidates
// and shows its tooltip.  This file: the composition, the layout, the input, the ruler.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ui/App.h"
#include "ui/Formatting.h"
#include "ui/Theme.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {

void App::drawTimeRuler(ImDrawList* dl, const ImVec2& p0, const ImVec2& p1, double nsPerPx) {
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
  const double base = static_cast<double>(main_.run->model.minTimeNs);
  const double first = std::floor((view_.viewStart - base) / step) * step;
  for (double t = first; base + t <= view_.viewEnd; t += step) {
    float x = static_cast<float>(p0.x + (base + t - view_.viewStart) / nsPerPx);
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
  // Iteration markers (the lines are drawn across the rows by drawTimeline).
  const auto& starts = main_.run->iterationStartNs;
  float lastLabel = -1e9f;
  for (size_t it = 0; it < starts.size(); ++it) {
    if (starts[it] == INT64_MAX) continue;
    const float x =
        static_cast<float>(p0.x + (static_cast<double>(starts[it]) - view_.viewStart) / nsPerPx);
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

void App::drawTimelineEmpty(ImDrawList* dl, const ImVec2& pos, const ImVec2& size) {
  if (overview_ && main_.loading()) {
    drawOverview(dl, pos, size);
    return;
  }
  const char* hint =
      main_.loading() ? "Loading..." : "Open a run: File > Open, or drop a file here";
  ImVec2 ts = ImGui::CalcTextSize(hint);
  dl->AddText(ImVec2(pos.x + (size.x - ts.x) / 2, pos.y + size.y / 2 - 20), theme::kTextDim, hint);
  if (main_.loading()) {
    ImGui::SetCursorScreenPos(ImVec2(pos.x + size.x / 2 - 160, pos.y + size.y / 2));
    ImGui::ProgressBar(main_.progress(), ImVec2(320, 18));
  }
  if (!bannerError_.empty()) drawErrorBanner(pos, size);
}

TimelineContext App::timelineLayout(ImDrawList* dl, const ImVec2& pos, const ImVec2& size) {
  TimelineContext ctx;
  ctx.dl = dl;
  ctx.run = main_.run.get();
  ctx.pos = pos;
  ctx.size = size;
  ctx.area0 = ImVec2(pos.x + kTimelineLabelWidth, pos.y + kTimelineRulerHeight);
  ctx.area1 = ImVec2(pos.x + size.x, pos.y + size.y);
  ctx.areaW = std::max(10.0f, ctx.area1.x - ctx.area0.x);
  ctx.nsPerPx = (view_.viewEnd - view_.viewStart) / ctx.areaW;
  ctx.step = view_.step;
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
  ctx.rowH = std::clamp(fill, view_.rowHeight, std::max(view_.rowHeight, 40.0f));
  // Row positions.
  ctx.rowY.resize(rows.size());
  float contentH = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].firstOfModule) contentH += kTimelineHeaderHeight;
    ctx.rowY[i] = contentH;
    contentH += ctx.heightOf(i);
  }
  view_.scrollY =
      std::clamp(view_.scrollY, 0.0f, std::max(0.0f, contentH - (ctx.area1.y - ctx.area0.y) + 8));
  for (float& y : ctx.rowY) y += ctx.area0.y - view_.scrollY;
  return ctx;
}

bool App::timelineInput(TimelineContext& ctx) {
  ImGuiIO& io = ImGui::GetIO();
  ImGui::SetCursorScreenPos(ImVec2(ctx.pos.x, ctx.area0.y));
  ImGui::InvisibleButton("##tlinput", ImVec2(ctx.size.x, std::max(1.0f, ctx.area1.y - ctx.area0.y)),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight |
                             ImGuiButtonFlags_MouseButtonMiddle);
  ctx.hovered = ImGui::IsItemHovered();
  ctx.mouse = io.MousePos;
  ctx.mouseT = view_.viewStart + (ctx.mouse.x - ctx.area0.x) * ctx.nsPerPx;
  const double mouseT = ctx.mouseT;
  if (ctx.hovered && io.MouseWheel != 0) {
    if (io.KeyShift) {
      view_.scrollY -= io.MouseWheel * ctx.rowH * 2;
    } else {
      double f = std::pow(0.8, io.MouseWheel);
      double anchor = ctx.mouse.x >= ctx.area0.x ? mouseT : view_.viewStart;
      nav_.zoomTo(anchor - (anchor - view_.viewStart) * f, anchor + (view_.viewEnd - anchor) * f);
      ctx.nsPerPx = (view_.viewEnd - view_.viewStart) / ctx.areaW;
    }
  }
  if (ImGui::IsItemActive() && (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3) ||
                                ImGui::IsMouseDragging(ImGuiMouseButton_Middle, 3))) {
    view_.viewStart -= io.MouseDelta.x * ctx.nsPerPx;
    view_.viewEnd -= io.MouseDelta.x * ctx.nsPerPx;
    view_.scrollY -= io.MouseDelta.y;
  }
  if (ctx.hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
    rangeSelecting_ = true;
    rangeStartNs_ = mouseT;
  }
  const ImVec2 drag = ImGui::GetMouseDragDelta(ImGuiMouseButton_Left, 0);
  const bool clicked = ImGui::IsItemDeactivated() &&
                       ImGui::IsMouseReleased(ImGuiMouseButton_Left) &&
                       drag.x * drag.x + drag.y * drag.y < 9;
  if (rangeSelecting_ && !ImGui::IsMouseDown(ImGuiMouseButton_Right)) {
    rangeSelecting_ = false;
    if (std::fabs(mouseT - rangeStartNs_) > 4 * ctx.nsPerPx)
      nav_.zoomTo(std::min(mouseT, rangeStartNs_), std::max(mouseT, rangeStartNs_));
  }
  ctx.nsPerPx = (view_.viewEnd - view_.viewStart) / ctx.areaW;
  ctx.viewStart = view_.viewStart;
  ctx.viewEnd = view_.viewEnd;
  ctx.vStart = static_cast<int64_t>(view_.viewStart);
  ctx.vEnd = static_cast<int64_t>(std::ceil(view_.viewEnd));
  return clicked;
}

TimelineHover App::drawTimelineLayers(const TimelineContext& ctx) {
  TimelineHover hover;
  int stuckRank = -1;
  StuckRects stuck(ctx.model().actions.size(), ImVec4(0, 0, -1, -1));
  // Row by row: its actions, what it never completed, its replay cursor.
  for (size_t i = 0; i < ctx.run->rows.size(); ++i) {
    if (!ctx.rowVisible(i)) continue;
    const RankReplayState st = ctx.run->replay.stateAt(ctx.run->rows[i].rank, ctx.step);
    const TimelineHover onAction = drawActionRow(ctx, i, st);
    if (onAction.what.kind != Selection::Kind::None) hover = onAction;
    const Selection onStuck = drawStuck(ctx, i, st, stuck);
    if (onStuck.kind != Selection::Kind::None) hover.what = onStuck, stuckRank = onStuck.rank;
    drawReplayCursor(ctx, i, st);
  }
  const Selection onArrow = view_.showArrows ? drawArrows(ctx) : Selection{};
  // A collective's band not on a member's bar takes the rank of what lies under it.
  const Selection onCollective = drawCollectives(ctx);
  if (onCollective.kind != Selection::Kind::None)
    hover.what = {onCollective.kind, onCollective.rank >= 0 ? onCollective.rank : hover.what.rank,
                  onCollective.index};
  if (view_.showPlan) drawCapturedPlan(ctx);
  drawWaits(ctx, stuck);
  // An arrow is the hover only where nothing else is.
  if (hover.what.kind == Selection::Kind::None) hover.what = onArrow;
  hover.stuckRank = stuckRank;
  return hover;
}

void App::drawTimeline(const ImVec2& pos, const ImVec2& size) {
  ImGui::SetCursorScreenPos(pos);
  ImGui::BeginChild("##timeline", size, false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  probes_.timeline = ImVec4(pos.x, pos.y, pos.x + size.x, pos.y + size.y);
  dl->AddRectFilled(pos, ImVec2(pos.x + size.x, pos.y + size.y), theme::kBackground);
  if (!main_.run) {
    drawTimelineEmpty(dl, pos, size);
    ImGui::EndChild();
    return;
  }
  if (view_.fitPending) nav_.zoomOpening();
  TimelineContext ctx = timelineLayout(dl, pos, size);
  const bool clicked = timelineInput(ctx);
  const ImVec2 area0 = ctx.area0, area1 = ctx.area1;

  dl->PushClipRect(ImVec2(pos.x, area0.y), area1, true);
  drawRowBackgrounds(ctx);
  drawIterationLines(ctx);
  dl->PushClipRect(area0, area1, true);
  const TimelineHover hover = drawTimelineLayers(ctx);
  drawTimeCursors(ctx);
  dl->PopClipRect();
  drawRowLabels(ctx);
  dl->AddLine(ImVec2(area0.x - 1, area0.y), ImVec2(area0.x - 1, area1.y), theme::kGrid);
  dl->PopClipRect();
  drawTimeRuler(dl, ImVec2(area0.x, pos.y), ImVec2(area1.x, area0.y), ctx.nsPerPx);
  dl->AddRectFilled(pos, ImVec2(area0.x, area0.y), theme::kBarBackground);
  {
    char buf[96];
    std::snprintf(buf, sizeof buf, "view %s",
                  formatDuration(view_.viewEnd - view_.viewStart).c_str());
    dl->AddText(ImVec2(pos.x + 8, pos.y + 4), theme::kTextDim, buf);
  }
  if (!bannerError_.empty()) drawErrorBanner(pos, size);

  // Tooltip and click.
  view_.hovered = hover.what;
  drawTimelineTooltip(ctx, hover);
  if (clicked) {
    if (hover.what.kind != Selection::Kind::None && !hover.folded)
      nav_.select(hover.what, false);
    else if (hover.folded)
      nav_.zoomTo(static_cast<double>(hover.foldStart), static_cast<double>(hover.foldEnd));
    else
      view_.selection = {};
  }
  ImGui::EndChild();
}

}  // namespace stagescope::ui
