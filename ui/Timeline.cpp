// The timeline: one row per rank (RankRows order), actions binary-searched to the visible
// range and folded below 3 px (TimeIndex), transfer arrows, plan overlay, replay state.  A
// colocated rank's row is split into one lane per module it holds (module colours, one label
// per lane, a "shared" badge); a local hand-off between two of its modules is a loop arrow
// from the sender's lane to the receiver's, labelled "local".
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ui/App.h"
#include "ui/IterationLines.h"

namespace stagescope::ui {
namespace {

constexpr float kLabelWidth = 200;
constexpr float kRulerHeight = 38;  // time labels above, iteration labels below
constexpr float kHeaderHeight = 18;
constexpr double kMinItemPx = 3;
constexpr double kMaxFoldPx = 4;  // a dense row folds into cells this wide, shaded by busy share

using K = events::ActionKind;

bool isCommKind(K k) {
  return k == K::RecvForward || k == K::SendForward || k == K::RecvBackward ||
         k == K::SendBackward || k == K::SendForwardRecvBackward || k == K::SendBackwardRecvForward;
}

const char* shortName(K k) {
  switch (k) {
    case K::Forward:
      return "F";
    case K::Backward:
      return "B";
    case K::DpReduce:
      return "DP";
    case K::OptimizerStep:
      return "OPT";
    default:
      return events::toString(k);
  }
}

float segmentDistance(ImVec2 p, ImVec2 a, ImVec2 b) {
  ImVec2 ab(b.x - a.x, b.y - a.y), ap(p.x - a.x, p.y - a.y);
  float len = ab.x * ab.x + ab.y * ab.y;
  float t = len > 0 ? std::clamp((ap.x * ab.x + ap.y * ab.y) / len, 0.0f, 1.0f) : 0.0f;
  float dx = a.x + t * ab.x - p.x, dy = a.y + t * ab.y - p.y;
  return std::sqrt(dx * dx + dy * dy);
}

void dashedLine(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 col, float thickness) {
  float dx = b.x - a.x, dy = b.y - a.y;
  float len = std::sqrt(dx * dx + dy * dy);
  if (len < 1) return;
  const float dash = 6, gap = 4;
  for (float s = 0; s < len; s += dash + gap) {
    float e = std::min(len, s + dash);
    dl->AddLine(ImVec2(a.x + dx * s / len, a.y + dy * s / len),
                ImVec2(a.x + dx * e / len, a.y + dy * e / len), col, thickness);
  }
}

void arrowHead(ImDrawList* dl, ImVec2 from, ImVec2 to, ImU32 col, float size) {
  float dx = to.x - from.x, dy = to.y - from.y;
  float len = std::sqrt(dx * dx + dy * dy);
  if (len < 1) return;
  dx /= len;
  dy /= len;
  ImVec2 base(to.x - dx * size, to.y - dy * size);
  dl->AddTriangleFilled(to, ImVec2(base.x - dy * size * 0.5f, base.y + dx * size * 0.5f),
                        ImVec2(base.x + dy * size * 0.5f, base.y - dx * size * 0.5f), col);
}

// The label of a colocated rank's split row: per lane, the module's colour bar and its grid
// coordinates; at the right, a badge naming the rank and that it is shared.  Returns the
// badge's rectangle (x0, y0, x1, y1).
ImVec4 drawSharedRowLabel(ImDrawList* dl, const RankRow& row, ImVec2 at, float laneH, ImU32 tc) {
  for (size_t l = 0; l < row.lanes.size(); ++l) {
    const float ly = at.y + laneH * static_cast<float>(l);
    dl->AddRectFilled(ImVec2(at.x, ly + 1), ImVec2(at.x + 6, ly + laneH - 1),
                      theme::moduleColour(row.lanes[l].moduleIndex, false));
    dl->AddText(ImVec2(at.x + 10, ly + (laneH - 15) / 2), tc, row.lanes[l].label.c_str());
  }
  char rank[16];
  std::snprintf(rank, sizeof rank, "r%d", row.rank);
  const char* shared = "shared";
  const float w = std::max(ImGui::CalcTextSize(shared).x, ImGui::CalcTextSize(rank).x) + 8;
  const float h = laneH * static_cast<float>(row.lanes.size());
  const ImVec2 b0(at.x + kLabelWidth - 4 - w, at.y + 3), b1(at.x + kLabelWidth - 4, at.y + h - 3);
  dl->AddRectFilled(b0, b1, IM_COL32(70, 74, 86, 255), 3);
  dl->AddRect(b0, b1, theme::kBridge, 3, 0, 1.5f);
  const float lineH = ImGui::GetTextLineHeight();
  const bool twoLines = h >= 2 * lineH + 8;
  const float ty = (b0.y + b1.y) / 2 - (twoLines ? lineH : lineH / 2);
  dl->AddText(ImVec2(b0.x + (w - ImGui::CalcTextSize(rank).x) / 2, ty), theme::kText, rank);
  if (twoLines)
    dl->AddText(ImVec2(b0.x + (w - ImGui::CalcTextSize(shared).x) / 2, ty + lineH), theme::kBridge,
                shared);
  return ImVec4(b0.x, b0.y, b1.x, b1.y);
}

}  // namespace

void App::drawTimeRuler(ImDrawList* dl, const ImVec2& p0, const ImVec2& p1, double nsPerPx) {
  dl->AddRectFilled(p0, p1, IM_COL32(34, 36, 41, 255));
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
                          IM_COL32(230, 230, 240, 200));
    if (x - lastLabel < 44) continue;  // labels would overlap: the marker alone
    char buf[24];
    std::snprintf(buf, sizeof buf, "it %zu", it);
    const ImVec2 ts = ImGui::CalcTextSize(buf);
    dl->AddRectFilled(ImVec2(x + 1, p1.y - ts.y - 3), ImVec2(x + ts.x + 7, p1.y - 1),
                      IM_COL32(60, 64, 74, 255), 2);
    dl->AddText(ImVec2(x + 4, p1.y - ts.y - 2), IM_COL32(235, 235, 245, 255), buf);
    lastLabel = x;
  }
}

void App::drawBusyRow(ImDrawList* dl, const LoadedRun& run, int rank, const RankReplayState& st,
                      const ImVec2& p0, const ImVec2& p1, double nsPerPx) {
  const TimeColumns& times = run.actionTimes[rank];
  const auto& model = run.model;
  // Only the run's span is shaded: before a rank's first action inside it is a bubble too.
  const double from = std::max(view_.viewStart, static_cast<double>(model.minTimeNs));
  const double to = std::min(view_.viewEnd, static_cast<double>(model.maxTimeNs));
  if (to <= from) return;
  const int c0 = static_cast<int>(std::floor((from - view_.viewStart) / nsPerPx));
  const int c1 = std::min(static_cast<int>(std::ceil((to - view_.viewStart) / nsPerPx)),
                          static_cast<int>(p1.x - p0.x));
  if (c1 <= c0) return;
  // The shares depend only on the run, the rank and the columns' times: a frame that shows the
  // same columns as the last one (hover, replay, a static view) reuses them.
  if (busyCache_.size() <= static_cast<size_t>(rank)) busyCache_.resize(rank + 1);
  BusyCache& cache = busyCache_[rank];
  const double colT0 = view_.viewStart + c0 * nsPerPx;
  if (cache.run != &run || cache.t0 != colT0 || cache.nsPerPx != nsPerPx ||
      cache.columns != c1 - c0) {
    busyPerColumn(times, colT0, nsPerPx, c1 - c0, cache.busy);
    cache.run = &run;
    cache.t0 = colT0;
    cache.nsPerPx = nsPerPx;
    cache.columns = c1 - c0;
  }
  const std::vector<float>& busyScratch_ = cache.busy;
  // The replay: actions from st.done on have not run yet at this step (dimmed).
  int pendingCol = c1;
  if (st.done >= 0 && static_cast<size_t>(st.done) < times.size())
    pendingCol = std::clamp(
        static_cast<int>(std::floor(
            (static_cast<double>(times.startNs[static_cast<size_t>(st.done)]) - view_.viewStart) /
            nsPerPx)),
        c0, c1);
  // Neighbouring columns of the same shade (steps of 1/32) and replay state are one rectangle.
  const auto level = [&](int c) {
    return static_cast<int>(busyScratch_[static_cast<size_t>(c - c0)] * 32 + 0.5f);
  };
  for (int c = c0; c < c1;) {
    const int l = level(c);
    const bool pending = c >= pendingCol;
    int e = c + 1;
    while (e < c1 && level(e) == l && (e >= pendingCol) == pending) ++e;
    ImU32 colour = theme::heatColour(static_cast<float>(l) / 32);
    if (pending) colour = (colour & 0x00ffffffu) | (80u << 24);
    dl->AddRectFilled(ImVec2(p0.x + static_cast<float>(c), p0.y),
                      ImVec2(p0.x + static_cast<float>(e), p1.y), colour);
    c = e;
  }
  probes_.busyRows.push_back(
      {rank, ImVec4(p0.x + static_cast<float>(c0), p0.y, p0.x + static_cast<float>(c1), p1.y)});
}

void App::drawTimeline(const ImVec2& pos, const ImVec2& size) {
  ImGui::SetCursorScreenPos(pos);
  ImGui::BeginChild("##timeline", size, false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  probes_.timeline = ImVec4(pos.x, pos.y, pos.x + size.x, pos.y + size.y);
  dl->AddRectFilled(pos, ImVec2(pos.x + size.x, pos.y + size.y), theme::kBackground);
  const LoadedRun* run = main_.run.get();
  if (!run && overview_ && main_.loading()) {
    drawOverview(dl, pos, size);
    ImGui::EndChild();
    return;
  }
  if (!run) {
    const char* hint =
        main_.loading() ? "Loading..." : "Open a run: File > Open, or drop a file here";
    ImVec2 ts = ImGui::CalcTextSize(hint);
    dl->AddText(ImVec2(pos.x + (size.x - ts.x) / 2, pos.y + size.y / 2 - 20), theme::kTextDim,
                hint);
    if (main_.loading()) {
      ImGui::SetCursorScreenPos(ImVec2(pos.x + size.x / 2 - 160, pos.y + size.y / 2));
      ImGui::ProgressBar(main_.progress(), ImVec2(320, 18));
    }
    if (!bannerError_.empty()) drawErrorBanner(pos, size);
    ImGui::EndChild();
    return;
  }
  const auto& model = run->model;
  if (view_.fitPending) zoomFit();

  const ImVec2 area0(pos.x + kLabelWidth, pos.y + kRulerHeight);
  const ImVec2 area1(pos.x + size.x, pos.y + size.y);
  const float areaW = std::max(10.0f, area1.x - area0.x);
  double nsPerPx = (view_.viewEnd - view_.viewStart) / areaW;
  auto xOf = [&](double t) {
    return static_cast<float>(area0.x + (t - view_.viewStart) / nsPerPx);
  };
  // Rows grow to fill the panel (up to 40 px per lane) when there are few of them.
  int modulesShown = 0, lanes = 0;
  for (const auto& r : run->rows) {
    modulesShown += r.firstOfModule ? 1 : 0;
    lanes += r.laneCount();
  }
  const float fill = (area1.y - area0.y - static_cast<float>(modulesShown) * kHeaderHeight - 4) /
                     std::max<float>(1.0f, static_cast<float>(lanes));
  const float rowH = std::clamp(fill, view_.rowHeight, std::max(view_.rowHeight, 40.0f));
  effectiveRowHeight_ = rowH;
  // A row's height: one lane per module its rank holds.
  auto heightOf = [&](size_t row) { return rowH * static_cast<float>(run->rows[row].laneCount()); };

  // Row positions.
  std::vector<float> rowY(run->rows.size());
  float contentH = 0;
  for (size_t i = 0; i < run->rows.size(); ++i) {
    if (run->rows[i].firstOfModule) contentH += kHeaderHeight;
    rowY[i] = contentH;
    contentH += heightOf(i);
  }
  view_.scrollY =
      std::clamp(view_.scrollY, 0.0f, std::max(0.0f, contentH - (area1.y - area0.y) + 8));
  for (float& y : rowY) y += area0.y - view_.scrollY;

  // Input.
  ImGuiIO& io = ImGui::GetIO();
  ImGui::SetCursorScreenPos(ImVec2(pos.x, area0.y));
  ImGui::InvisibleButton("##tlinput", ImVec2(size.x, std::max(1.0f, area1.y - area0.y)),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight |
                             ImGuiButtonFlags_MouseButtonMiddle);
  const bool hovered = ImGui::IsItemHovered();
  const ImVec2 mouse = io.MousePos;
  const double mouseT = view_.viewStart + (mouse.x - area0.x) * nsPerPx;
  if (hovered && io.MouseWheel != 0) {
    if (io.KeyShift) {
      view_.scrollY -= io.MouseWheel * rowH * 2;
    } else {
      double f = std::pow(0.8, io.MouseWheel);
      double anchor = mouse.x >= area0.x ? mouseT : view_.viewStart;
      zoomTo(anchor - (anchor - view_.viewStart) * f, anchor + (view_.viewEnd - anchor) * f);
      nsPerPx = (view_.viewEnd - view_.viewStart) / areaW;
    }
  }
  if (ImGui::IsItemActive() && (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3) ||
                                ImGui::IsMouseDragging(ImGuiMouseButton_Middle, 3))) {
    view_.viewStart -= io.MouseDelta.x * nsPerPx;
    view_.viewEnd -= io.MouseDelta.x * nsPerPx;
    view_.scrollY -= io.MouseDelta.y;
  }
  if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
    rangeSelecting_ = true;
    rangeStartNs_ = mouseT;
  }
  bool clicked = ImGui::IsItemDeactivated() && ImGui::IsMouseReleased(ImGuiMouseButton_Left) &&
                 ImGui::GetMouseDragDelta(ImGuiMouseButton_Left, 0).x *
                             ImGui::GetMouseDragDelta(ImGuiMouseButton_Left, 0).x +
                         ImGui::GetMouseDragDelta(ImGuiMouseButton_Left, 0).y *
                             ImGui::GetMouseDragDelta(ImGuiMouseButton_Left, 0).y <
                     9;
  if (rangeSelecting_ && !ImGui::IsMouseDown(ImGuiMouseButton_Right)) {
    rangeSelecting_ = false;
    if (std::fabs(mouseT - rangeStartNs_) > 4 * nsPerPx)
      zoomTo(std::min(mouseT, rangeStartNs_), std::max(mouseT, rangeStartNs_));
  }
  nsPerPx = (view_.viewEnd - view_.viewStart) / areaW;
  const int64_t vStart = static_cast<int64_t>(view_.viewStart);
  const int64_t vEnd = static_cast<int64_t>(std::ceil(view_.viewEnd));

  Selection hover;
  size_t hoverFolded = 0;
  int64_t hoverFoldStart = 0, hoverFoldEnd = 0;
  const int64_t step = view_.step;

  dl->PushClipRect(ImVec2(pos.x, area0.y), area1, true);
  // Module header bands and row backgrounds.
  for (size_t i = 0; i < run->rows.size(); ++i) {
    float y = rowY[i];
    if (y > area1.y || y + heightOf(i) < area0.y - kHeaderHeight) continue;
    dl->AddRectFilled(ImVec2(pos.x, y), ImVec2(area1.x, y + heightOf(i)),
                      (i & 1) ? theme::kRowB : theme::kRowA);
    const auto& lanesOfRow = run->rows[i].lanes;
    if (run->rows[i].shared()) {
      // A split row: each lane tinted in its module's colour, separated by a thin line.
      for (size_t l = 0; l < lanesOfRow.size(); ++l) {
        const float ly = y + rowH * static_cast<float>(l);
        dl->AddRectFilled(ImVec2(pos.x, ly), ImVec2(area1.x, ly + rowH),
                          theme::moduleColour(lanesOfRow[l].moduleIndex, false, 0.07f));
        if (l > 0) dl->AddLine(ImVec2(pos.x, ly), ImVec2(area1.x, ly), IM_COL32(70, 74, 84, 255));
      }
    }
    if (run->rows[i].firstOfModule) {
      float hy = y - kHeaderHeight;
      int mi = run->rows[i].moduleIndex;
      dl->AddRectFilled(ImVec2(pos.x, hy), ImVec2(area1.x, y), IM_COL32(44, 47, 54, 255));
      dl->AddRectFilled(ImVec2(pos.x, hy), ImVec2(pos.x + 4, y), theme::moduleColour(mi, false));
      char buf[160];
      if (run->rows[i].shared()) {
        std::snprintf(buf, sizeof buf, "shared ranks: %s   (one 1F1B order per rank)",
                      model.moduleLabel(run->rows[i].rank).c_str());
      } else if (mi >= 0) {
        const auto& mod = model.info.modules[mi];
        std::snprintf(buf, sizeof buf, "%s  (%s)   tp%d x pp%d x dp%d  @%d", mod.name.c_str(),
                      mod.kind.c_str(), mod.tp, mod.pp, mod.dp, mod.offset);
      } else {
        std::snprintf(buf, sizeof buf, "(no module)");
      }
      dl->AddText(ImVec2(pos.x + 10, hy + 1), theme::kText, buf);
    }
  }

  // Iteration markers: where each iteration's first action begins, while they are far enough
  // apart to tell from the rows' shading (ui/IterationLines.h).
  std::vector<float> iterationXs;
  for (size_t it = 0; it < run->iterationStartNs.size(); ++it) {
    if (run->iterationStartNs[it] == INT64_MAX) continue;
    const float x = xOf(static_cast<double>(run->iterationStartNs[it]));
    if (x >= area0.x && x <= area1.x) iterationXs.push_back(x);
  }
  probes_.timelineIterationLines = 0;
  if (drawsIterationLines(iterationXs.size(), area1.x - area0.x)) {
    for (const float x : iterationXs)
      dl->AddLine(ImVec2(x, area0.y), ImVec2(x, area1.y), IM_COL32(230, 230, 240, 70), 1.5f);
    probes_.timelineIterationLines = static_cast<int>(iterationXs.size());
  }

  // Items.
  std::vector<ImVec4> stuckRect(model.actions.size(), ImVec4(0, 0, -1, -1));
  dl->PushClipRect(area0, area1, true);
  for (size_t i = 0; i < run->rows.size(); ++i) {
    const float y = rowY[i];
    const float rowHt = heightOf(i);
    if (y > area1.y || y + rowHt < area0.y) continue;
    const RankRow& row = run->rows[i];
    const int rank = row.rank;
    const auto& acts = model.actions[rank];
    const auto* plan = rank < static_cast<int>(model.plan.size()) ? &model.plan[rank] : nullptr;
    const TimeColumns& times = run->actionTimes[rank];
    IndexRange range = visibleRange(times, vStart, vEnd);
    drawScratch_.clear();
    const RankReplayState st = run->replay.stateAt(rank, step);
    const bool rowHovered = hovered && mouse.y >= y && mouse.y < y + rowHt && mouse.x >= area0.x;
    if (static_cast<double>(range.size()) * kMinItemPx > areaW) {
      // More actions in view than could each be kMinItemPx wide: the row is its busy share per
      // pixel column (at most one primitive per column), bubbles dark, busy stretches bright.
      drawBusyRow(dl, *run, rank, st, ImVec2(area0.x, y + 2), ImVec2(area1.x, y + rowHt - 2),
                  nsPerPx);
      if (rowHovered) {
        const double c0 = view_.viewStart + std::floor(mouse.x - area0.x) * nsPerPx;
        const IndexRange under = visibleRange(times, static_cast<int64_t>(c0),
                                              static_cast<int64_t>(std::ceil(c0 + nsPerPx)));
        if (under.size() > 0) {
          hover = {Selection::Kind::Action, rank, static_cast<int64_t>(under.first)};
          hoverFolded = under.size() > 1 ? under.size() : 0;
          hoverFoldStart = times.startNs[under.first];
          hoverFoldEnd = times.endNs[under.last - 1];
        }
      }
      if (view_.selection.kind == Selection::Kind::Action && view_.selection.rank == rank &&
          view_.selection.index >= 0 && view_.selection.index < static_cast<int64_t>(acts.size())) {
        const auto& a = acts[view_.selection.index];
        const float x0 = xOf(static_cast<double>(a.startNs));
        const float x1 = std::max(xOf(static_cast<double>(a.endNs)), x0 + 3.0f);
        dl->AddRect(ImVec2(x0 - 2, y), ImVec2(x1 + 2, y + rowHt), IM_COL32(255, 255, 255, 255), 0,
                    0, 2);
      }
    } else {
      foldRange(times, range, nsPerPx, kMinItemPx, drawScratch_, kMaxFoldPx);
    }
    float prevX1 = -1e9f;
    for (const DrawItem& d : drawScratch_) {
      const auto& a = acts[d.first];
      // The action's lane on a split row (its module's); folded runs of actions and rank-wide
      // actions span the whole row.
      const int lane = d.folded() ? -1 : row.laneOf(a.module);
      const float laneY = lane < 0 ? y : y + rowH * static_cast<float>(lane);
      const float laneH = lane < 0 ? rowHt : rowH;
      const int mi = lane >= 0 ? row.lanes[lane].moduleIndex : row.moduleIndex;
      float x0 = xOf(static_cast<double>(d.startNs));
      float x1 = std::max(xOf(static_cast<double>(d.endNs)), x0 + 1.0f);
      if (view_.showIdle && x0 - prevX1 > 6 && prevX1 > area0.x - 1e6f) {
        dl->AddRectFilled(ImVec2(prevX1, y + rowHt - 4), ImVec2(x0, y + rowHt - 1),
                          IM_COL32(200, 70, 60, 110));
      }
      prevX1 = x1;
      const bool pending = static_cast<int64_t>(d.first) >= st.done &&
                           !(st.running && static_cast<int32_t>(d.first) == st.done);
      const bool running = st.running && static_cast<int32_t>(d.first) <= st.done &&
                           st.done < static_cast<int32_t>(d.last);
      const float alpha = pending ? 0.30f : 1.0f;
      float top = laneY + 2, bottom = laneY + laneH - 2;
      if (d.folded()) {
        // A dense stretch: its cell shows how busy the rank was there (bubbles dark).
        ImU32 c = pending ? theme::actionColour(mi, static_cast<int>(a.kind), alpha * 0.75f)
                          : theme::heatColour(d.busy);
        dl->AddRectFilled(ImVec2(x0, top), ImVec2(x1, bottom), c);
        if (x1 - x0 > 40) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%zu", d.last - d.first);
          dl->AddText(ImVec2(x0 + 3, top + (bottom - top - 14) / 2), IM_COL32(230, 230, 230, 160),
                      buf);
        }
      } else {
        if (isCommKind(a.kind)) top = laneY + laneH * 0.5f;
        ImU32 c = theme::actionColour(mi, static_cast<int>(a.kind), alpha);
        dl->AddRectFilled(ImVec2(x0, top), ImVec2(x1, bottom), c, 1.5f);
        const float w = x1 - x0;
        if (!isCommKind(a.kind) && w > 14) {
          char buf[48];
          if (a.microbatch >= 0) {
            if (w > 70)
              std::snprintf(buf, sizeof buf, "%s mb%d", shortName(a.kind), a.microbatch);
            else
              std::snprintf(buf, sizeof buf, "%s%d", shortName(a.kind), a.microbatch);
          } else {
            std::snprintf(buf, sizeof buf, "%s", shortName(a.kind));
          }
          ImVec2 ts = ImGui::CalcTextSize(buf);
          if (ts.x + 4 < w) {
            ImU32 tc = theme::textOn(theme::actionColour(mi, static_cast<int>(a.kind)));
            if (pending) tc = (tc & 0x00ffffff) | (110u << 24);
            dl->AddText(ImVec2(x0 + (w - ts.x) / 2, top + (bottom - top - ts.y) / 2), tc, buf);
          }
        }
        if ((a.kind == K::Forward || a.kind == K::Backward) && w > 16 && !pending &&
            probes_.items.size() < 16 && x0 > area0.x + 2 && x1 < area1.x - 2 && y > area0.y &&
            y + rowH < area1.y) {
          probes_.items.push_back({rank, static_cast<int64_t>(d.first), ImVec4(x0, top, x1, bottom),
                                   theme::actionColour(mi, static_cast<int>(a.kind))});
        }
        if (lane >= 0 && (a.kind == K::Forward || a.kind == K::Backward) && w > 8 && !pending &&
            probes_.laneItems.size() < 32 && x0 > area0.x + 2 && x1 < area1.x - 2 &&
            laneY > area0.y && laneY + laneH < area1.y) {
          probes_.laneItems.push_back({rank, lane, mi, ImVec4(x0, top, x1, bottom),
                                       theme::actionColour(mi, static_cast<int>(a.kind))});
        }
        if (view_.showPlan && plan && d.first < plan->size()) {
          const auto& pa = (*plan)[d.first];
          dl->AddRectFilled(ImVec2(x0, laneY), ImVec2(x1, laneY + 3),
                            theme::actionColour(mi, static_cast<int>(pa.kind), 0.9f));
          if (pa.kind != a.kind || pa.microbatch != a.microbatch || pa.module != a.module) {
            dl->AddRect(ImVec2(x0 - 1, laneY), ImVec2(x1 + 1, laneY + laneH), theme::kBad, 0, 0,
                        2.5f);
            if (x1 - x0 > 30) {
              char buf[48];
              std::snprintf(buf, sizeof buf, "plan %s%d", shortName(pa.kind), pa.microbatch);
              dl->AddText(ImVec2(x0 + 2, laneY + laneH + 0), theme::kBad, buf);
            }
          }
        }
      }
      if (running)
        dl->AddRect(ImVec2(x0 - 1, laneY + 1), ImVec2(x1 + 1, laneY + laneH - 1), theme::kAccent, 0,
                    0, 2);
      if (view_.selection.kind == Selection::Kind::Action && view_.selection.rank == rank &&
          view_.selection.index >= static_cast<int64_t>(d.first) &&
          view_.selection.index < static_cast<int64_t>(d.last))
        dl->AddRect(ImVec2(x0 - 2, laneY), ImVec2(x1 + 2, laneY + laneH),
                    IM_COL32(255, 255, 255, 255), 0, 0, 2);
      if (rowHovered && mouse.x >= x0 - 1 && mouse.x <= x1 + 1 && mouse.y >= laneY &&
          mouse.y < laneY + laneH) {
        hover = {Selection::Kind::Action, rank, static_cast<int64_t>(d.first)};
        hoverFolded = d.folded() ? d.last - d.first : 0;
        hoverFoldStart = d.startNs;
        hoverFoldEnd = d.endNs;
      }
    }
    // A rank that did not complete: its stuck action (the first planned action it never
    // completed) after its last recorded one, in the colour of its fate.
    const RankProblem* fateOf = run->fateOf(rank);  // none while the details load
    if (fateOf && fateOf->fate != RankFate::Completed &&
        st.done >= static_cast<int32_t>(acts.size())) {
      const RankProblem& fate = *fateOf;
      const int64_t from = acts.empty() ? model.minTimeNs : acts.back().endNs;
      const float sx0 = xOf(static_cast<double>(from));
      const float sx1 =
          std::max(xOf(static_cast<double>(std::max(model.maxTimeNs, from))), sx0 + 60);
      const ImU32 fc = theme::fateColour(fate.fate);
      const ImVec2 s0(sx0 + 1, y + 2), s1(sx1, y + rowHt - 2);
      dl->AddRectFilled(s0, s1, (fc & 0x00ffffffu) | (70u << 24), 1.5f);
      dl->PushClipRect(s0, s1, true);
      for (float hx = s0.x - rowHt; hx < s1.x; hx += 9)  // hatching: not a completed action
        dl->AddLine(ImVec2(hx, s1.y), ImVec2(hx + rowHt, s0.y), (fc & 0x00ffffffu) | (120u << 24),
                    1);
      dl->PopClipRect();
      dl->AddRect(s0, s1, fc, 1.5f, 0, 2.5f);
      std::string label = toString(fate.fate);
      if (plan && fate.stuckPlan >= 0 && fate.stuckPlan < static_cast<int32_t>(plan->size())) {
        // A hung rank recorded everything up to the wait it timed out in; a rank that was
        // killed or stopped may have lost its last uncommitted records.
        const auto& pa = (*plan)[fate.stuckPlan];
        char buf[96];
        std::snprintf(
            buf, sizeof buf,
            fate.fate == RankFate::Hung ? " in %s it%d mb%d" : ": next planned %s it%d mb%d",
            shortName(pa.kind), pa.iteration, pa.microbatch);
        label += buf;
      }
      if (fate.waitsOnRank >= 0) label += ", waits on r" + std::to_string(fate.waitsOnRank);
      // How long it was stuck: from its last completed action until it gave up waiting.
      label +=
          " · " + formatDuration(static_cast<double>(std::max(fate.stuckUntilNs, from) - from));
      // The label and the arrows start at the visible part of the block.
      const float visibleX0 = std::max(s0.x, area0.x);
      dl->PushClipRect(s0, s1, true);
      dl->AddText(ImVec2(visibleX0 + 5, y + (rowHt - ImGui::GetTextLineHeight()) / 2),
                  IM_COL32(255, 235, 225, 255), label.c_str());
      dl->PopClipRect();
      stuckRect[rank] = ImVec4(visibleX0, s0.y, s1.x, s1.y);
      probes_.stuck.push_back({rank, stuckRect[rank], fc});
      if (view_.selection.kind == Selection::Kind::Stuck && view_.selection.rank == rank)
        dl->AddRect(ImVec2(s0.x - 2, s0.y - 2), ImVec2(s1.x + 2, s1.y + 2),
                    IM_COL32(255, 255, 255, 255), 0, 0, 2);
      if (rowHovered && mouse.x >= s0.x && mouse.x <= s1.x) {
        hover = {Selection::Kind::Stuck, rank, -1};
        ImGui::BeginTooltip();
        ImGui::Text("rank %d %s", rank, label.c_str());
        if (!fate.why.empty()) ImGui::TextDisabled("%s", fate.why.c_str());
        ImGui::EndTooltip();
      }
    }
    // Replay cursor of this rank.
    if (step > 0 && !acts.empty()) {
      int64_t t = st.running ? acts[st.done].startNs
                             : (st.done > 0 ? acts[st.done - 1].endNs : acts.front().startNs);
      float x = xOf(static_cast<double>(t));
      dl->AddTriangleFilled(ImVec2(x - 5, y + rowHt), ImVec2(x + 5, y + rowHt),
                            ImVec2(x, y + rowHt - 7), theme::kAccent);
    }
  }
  if (view_.showArrows) drawArrows(dl, area0, area1, nsPerPx, rowY);
  drawCollectives(dl, area0, area1, nsPerPx, rowY, &hover);
  if (view_.showPlan) drawCapturedPlan(dl, area0, area1, nsPerPx, rowY);
  // The wait-for graph: an arrow from each stuck action to the rank it waits on (to that
  // rank's stuck action, or to the end of its last action).
  for (const WaitEdge& w : run->problems.waits) {
    const ImVec4 a = stuckRect[w.rank];
    if (a.z < a.x) continue;
    const int row = run->rowOfRank[w.waitsOn];
    if (row < 0) continue;
    // Leave from the left part of the stuck action, arrive further right on the target, so
    // the two arrows of a cycle stay apart.
    const bool down = rowY[row] > a.y;
    ImVec2 from(a.x + std::min(24.0f, (a.z - a.x) / 4), down ? a.w : a.y);
    ImVec2 to;
    const ImVec4 b = stuckRect[w.waitsOn];
    if (b.z >= b.x) {
      to = ImVec2(b.x + std::min(70.0f, (b.z - b.x) / 2), down ? b.y : b.w);
    } else {
      const auto& target = model.actions[w.waitsOn];
      const double t = target.empty() ? static_cast<double>(model.minTimeNs)
                                      : static_cast<double>(target.back().endNs);
      to = ImVec2(xOf(t), rowY[row] + (down ? 2 : heightOf(static_cast<size_t>(row)) - 2));
    }
    const float dy = (to.y - from.y) * 0.5f;
    const ImVec2 c1(from.x, from.y + dy), c2(to.x, to.y - dy);
    dl->AddBezierCubic(from, c1, c2, to, IM_COL32(20, 20, 20, 200), 5.0f);
    dl->AddBezierCubic(from, c1, c2, to, theme::kBad, 3.0f);
    arrowHead(dl, c2, to, theme::kBad, 11);
    dl->AddCircleFilled(from, 4, theme::kBad);
    probes_.waits.push_back({w.rank, w.waitsOn, from, to});
  }

  // Arrow hover (set by drawArrows through view_.hovered when no action is hovered).
  if (hover.kind == Selection::Kind::None && view_.hovered.kind == Selection::Kind::Transfer)
    hover = view_.hovered;

  // Global time of the current step.
  if (step > 0 && step <= static_cast<int64_t>(run->replay.size())) {
    const ReplayStep& s = run->replay.steps()[step - 1];
    const auto& a = model.actions[s.rank][s.action];
    float x = xOf(static_cast<double>(s.end ? a.endNs : a.startNs));
    for (float yy = area0.y; yy < area1.y; yy += 8)
      dl->AddLine(ImVec2(x, yy), ImVec2(x, std::min(yy + 4, area1.y)), IM_COL32(255, 200, 60, 150));
  }
  if (rangeSelecting_) {
    float xa = xOf(rangeStartNs_), xb = mouse.x;
    dl->AddRectFilled(ImVec2(std::min(xa, xb), area0.y), ImVec2(std::max(xa, xb), area1.y),
                      IM_COL32(110, 170, 255, 50));
    std::string d = formatDuration(std::fabs(mouseT - rangeStartNs_));
    dl->AddText(ImVec2(std::max(xa, xb) + 4, area0.y + 4), theme::kText, d.c_str());
  }
  dl->PopClipRect();

  // Labels column.
  for (size_t i = 0; i < run->rows.size(); ++i) {
    float y = rowY[i];
    const float rowHt = heightOf(i);
    if (y > area1.y || y + rowHt < area0.y) continue;
    const RankRow& row = run->rows[i];
    const int rank = row.rank;
    const RankReplayState st = run->replay.stateAt(rank, step);
    dl->AddRectFilled(ImVec2(pos.x, y), ImVec2(pos.x + kLabelWidth, y + rowHt),
                      (i & 1) ? IM_COL32(40, 42, 48, 255) : IM_COL32(36, 38, 44, 255));
    ImU32 tc = theme::kText;
    if (view_.selection.rank == rank) tc = theme::kAccent;
    // Where the running dot goes: the label's right end; a split row's badge's bottom.
    ImVec2 dot(pos.x + kLabelWidth - 10, y + rowHt / 2);
    if (row.shared()) {
      const ImVec4 badge = drawSharedRowLabel(dl, row, ImVec2(pos.x, y), rowH, tc);
      dot = ImVec2((badge.x + badge.z) / 2, badge.w - 7);
    } else {
      dl->AddRectFilled(ImVec2(pos.x, y + 1), ImVec2(pos.x + 4, y + rowH - 1),
                        theme::moduleColour(row.moduleIndex, false));
      dl->AddText(ImVec2(pos.x + 10, y + (rowH - 15) / 2), tc, row.label.c_str());
    }
    if (st.running) dl->AddCircleFilled(dot, 4, theme::kAccent);
    const RankProblem* fateOf = run->fateOf(rank);  // none while the details load
    if (fateOf && fateOf->fate != RankFate::Completed) {
      const RankFate fate = fateOf->fate;
      const char* word = toString(fate);
      const ImVec2 ws = ImGui::CalcTextSize(word);
      const ImVec2 b1(pos.x + kLabelWidth - 4, y + rowHt / 2 + ws.y / 2 + 1);
      const ImVec2 b0(b1.x - ws.x - 8, y + rowHt / 2 - ws.y / 2 - 1);
      dl->AddRectFilled(b0, b1, theme::fateColour(fate), 3);
      dl->AddText(ImVec2(b0.x + 4, b0.y + 1), theme::textOn(theme::fateColour(fate)), word);
    }
  }
  dl->AddLine(ImVec2(area0.x - 1, area0.y), ImVec2(area0.x - 1, area1.y), theme::kGrid);
  dl->PopClipRect();
  drawTimeRuler(dl, ImVec2(area0.x, pos.y), ImVec2(area1.x, area0.y), nsPerPx);
  dl->AddRectFilled(pos, ImVec2(area0.x, area0.y), IM_COL32(34, 36, 41, 255));
  {
    char buf[96];
    std::snprintf(buf, sizeof buf, "view %s",
                  formatDuration(view_.viewEnd - view_.viewStart).c_str());
    dl->AddText(ImVec2(pos.x + 8, pos.y + 4), theme::kTextDim, buf);
  }
  if (!bannerError_.empty()) drawErrorBanner(pos, size);

  // Tooltip and click.
  view_.hovered = hover;
  if (hovered && hover.kind == Selection::Kind::Action) {
    const auto& a = model.actions[hover.rank][hover.index];
    ImGui::BeginTooltip();
    if (hoverFolded) {
      ImGui::Text("%zu actions on rank %d (zoom in)", hoverFolded, hover.rank);
      ImGui::TextDisabled(
          "%s", formatDuration(static_cast<double>(hoverFoldEnd - hoverFoldStart)).c_str());
    } else {
      ImGui::Text("%s  it%d  mb%d   rank %d (%s pp%d)", events::toString(a.kind), a.iteration,
                  a.microbatch, a.rank, a.module.c_str(), a.stage);
      ImGui::TextDisabled("start %s   duration %s",
                          formatDuration(static_cast<double>(a.startNs - model.minTimeNs)).c_str(),
                          formatDuration(static_cast<double>(a.endNs - a.startNs)).c_str());
      if (!a.peers.empty()) {
        std::string peers;
        for (int p : a.peers) peers += (peers.empty() ? "" : ", ") + std::to_string(p);
        ImGui::TextDisabled("peers %s", peers.c_str());
      }
      RankReplayState st = run->replay.stateAt(hover.rank, step);
      const char* state = hover.index < st.done                    ? "done"
                          : (st.running && hover.index == st.done) ? "running"
                                                                   : "pending";
      ImGui::TextDisabled("at step %lld: %s", static_cast<long long>(step), state);
    }
    ImGui::EndTooltip();
  } else if (hovered && hover.kind == Selection::Kind::Collective) {
    collectiveTooltip(hover.index);
  } else if (hovered && hover.kind == Selection::Kind::Transfer) {
    const auto& t = model.transfers[hover.index];
    ImGui::BeginTooltip();
    ImGui::Text("%s %s  it%d mb%d%s", t.edge.c_str(), events::toString(t.direction), t.iteration,
                t.microbatch, model::isLocalHandOff(t) ? "  (local hand-off)" : "");
    ImGui::TextDisabled("r%d -> r%d   %s  %s  %s", t.srcRank, t.dstRank,
                        formatShape(t.shape).c_str(), t.dtype.c_str(),
                        formatBytes(t.bytes).c_str());
    ImGui::EndTooltip();
  }
  if (clicked) {
    if (hover.kind != Selection::Kind::None && !hoverFolded)
      select(hover, false);
    else if (hoverFolded)
      zoomTo(static_cast<double>(hoverFoldStart), static_cast<double>(hoverFoldEnd));
    else
      view_.selection = {};
  }
  ImGui::EndChild();
}

void App::drawArrows(ImDrawList* dl, const ImVec2& area0, const ImVec2& area1, double nsPerPx,
                     const std::vector<float>& rowY) {
  const LoadedRun* run = main_.run.get();
  const auto& model = run->model;
  const double span = view_.viewEnd - view_.viewStart;
  auto lo = std::lower_bound(run->pairSendStart.begin(), run->pairSendStart.end(),
                             static_cast<int64_t>(view_.viewStart - span));
  auto hi = std::upper_bound(run->pairSendStart.begin(), run->pairSendStart.end(),
                             static_cast<int64_t>(view_.viewEnd));
  view_.hovered = {};
  const size_t count = static_cast<size_t>(hi - lo);
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const bool mouseIn =
      mouse.x >= area0.x && mouse.x < area1.x && mouse.y >= area0.y && mouse.y < area1.y;
  const float rowH = effectiveRowHeight_;
  const int64_t step = view_.step;
  const bool dense = static_cast<float>(count) > (area1.x - area0.x) / 10;
  float best = 5;
  std::vector<float> lastLocalLabel(run->rows.size(), -1e9f);  // per row: one label per 80 px
  int64_t selectedTransfer =
      view_.selection.kind == Selection::Kind::Transfer ? view_.selection.index : -1;
  int32_t selectedPair = selectedTransfer >= 0 ? run->transferPair[selectedTransfer] : -1;
  // Zoomed out (dense) only in-flight and selected messages are drawn; with no replay step in
  // progress nothing is in flight, so the visible pairs need not be visited at all (at 10^6
  // events they are ~10^5 per frame).
  const bool replayMid = step > 0 && step < static_cast<int64_t>(run->replay.size());
  if (dense && !replayMid) lo = hi;
  if (dense && !replayMid && selectedPair >= 0) {
    const PairActions& sp = run->pairActions[selectedPair];
    if (sp.sendAction >= 0 && sp.recvAction >= 0) {
      // The selected pair's position in pairsBySendStart: among those with its send start.
      const int64_t t0 = model.actions[sp.sendRank][sp.sendAction].startNs;
      auto first = std::lower_bound(run->pairSendStart.begin(), run->pairSendStart.end(), t0);
      for (auto it = first; it != run->pairSendStart.end() && *it == t0; ++it)
        if (run->pairsBySendStart[it - run->pairSendStart.begin()] == selectedPair) {
          lo = it;
          hi = it + 1;
        }
    }
  }
  for (auto it = lo; it != hi; ++it) {
    const int32_t p = run->pairsBySendStart[it - run->pairSendStart.begin()];
    const PairActions& pa = run->pairActions[p];
    const auto& sa = model.actions[pa.sendRank][pa.sendAction];
    const auto& ra = model.actions[pa.recvRank][pa.recvAction];
    if (static_cast<double>(ra.endNs) < view_.viewStart) continue;
    const bool inFlight = step > 0 &&
                          run->replay.positionOf(pa.sendRank, pa.sendAction, false) < step &&
                          run->replay.positionOf(pa.recvRank, pa.recvAction, true) >= step;
    const bool selected = p == selectedPair;
    if (dense && !inFlight && !selected) continue;
    const int rs = run->rowOfRank[pa.sendRank], rr = run->rowOfRank[pa.recvRank];
    if (rs < 0 || rr < 0) continue;
    const auto& pair = model.pairs[p];
    const auto& t = model.transfers[pair.send];
    // On a split (colocated) row the arrow leaves the sender module's lane and enters the
    // receiver module's.
    const auto [srcModule, dstModule] = model::edgeModules(t);
    const int ls = std::max(0, run->rows[rs].laneOf(srcModule));
    const int lr = std::max(0, run->rows[rr].laneOf(dstModule));
    const float ys = rowY[rs] + rowH * static_cast<float>(ls);
    const float yr = rowY[rr] + rowH * static_cast<float>(lr);
    ImVec2 a(
        static_cast<float>(area0.x + (static_cast<double>(sa.startNs) - view_.viewStart) / nsPerPx),
        ys + rowH * 0.75f);
    ImVec2 b(
        static_cast<float>(area0.x + (static_cast<double>(ra.endNs) - view_.viewStart) / nsPerPx),
        yr + rowH * (yr > ys ? 0.5f : 0.95f));
    ImU32 col = t.direction == events::Direction::Activation ? theme::kP2P : theme::kGradArrow;
    if (t.edgeKind == events::EdgeKind::Bridge) col = theme::kBridge;
    if (!pair.sidesAgree()) col = theme::kBad;
    float thick = 1.2f;
    if (inFlight) {
      col = theme::kAccent;
      thick = 2.2f;
    }
    if (selected) {
      col = IM_COL32(255, 255, 255, 255);
      thick = 2.5f;
    }
    if (model::isLocalHandOff(t)) {
      // A local hand-off never left the rank: a loop on its row from the sender's lane to the
      // receiver's, labelled.
      const float bulge = std::max(18.0f, std::fabs(b.y - a.y) * 0.6f);
      const float right = std::max(a.x, b.x) + bulge;
      const ImVec2 c1(right, a.y), c2(right, b.y);
      dl->AddBezierCubic(a, c1, c2, b, col, thick + 0.8f);
      arrowHead(dl, c2, b, col, 7);
      const ImVec2 at(right - bulge * 0.25f + 2, (a.y + b.y) / 2 - ImGui::GetTextLineHeight() / 2);
      if (at.x - lastLocalLabel[rs] > 80 || inFlight || selected) {
        dl->AddText(at, col, "local");
        lastLocalLabel[rs] = at.x;
      }
      if (probes_.locals.size() < 16 && a.x > area0.x && right + 40 < area1.x)
        probes_.locals.push_back({t.rank, a, b, col});
      if (mouseIn) {
        const ImVec2 mid(0.125f * a.x + 0.375f * c1.x + 0.375f * c2.x + 0.125f * b.x,
                         0.125f * a.y + 0.375f * c1.y + 0.375f * c2.y + 0.125f * b.y);
        const float d = std::min(segmentDistance(mouse, a, mid), segmentDistance(mouse, mid, b));
        if (d < best) {
          best = d;
          view_.hovered = {Selection::Kind::Transfer, t.rank, pair.send};
        }
      }
      continue;
    }
    if (t.edgeKind == events::EdgeKind::Bridge)
      dashedLine(dl, a, b, col, thick + 0.6f);
    else
      dl->AddLine(a, b, col, thick);
    arrowHead(dl, a, b, col, 7);
    if (mouseIn) {
      float d = segmentDistance(mouse, a, b);
      if (d < best) {
        best = d;
        view_.hovered = {Selection::Kind::Transfer, t.rank, pair.send};
      }
    }
  }
  if (dense) {
    const char* msg = "transfers: zoom in to see arrows";
    dl->AddText(ImVec2(area1.x - ImGui::CalcTextSize(msg).x - 8, area1.y - 20), theme::kTextDim,
                msg);
  }
}

}  // namespace stagescope::ui
