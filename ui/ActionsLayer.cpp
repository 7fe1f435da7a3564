// The timeline's actions layer: a row's actions, binary-searched to the visible range and
// folded below 3 px (TimeIndex); zoomed out so far that they could not each be 3 px wide, the
// row is its busy share per pixel column.  On a split (colocated) row each action sits in its
// module's lane.  With the plan overlay a stagescope run's action carries its planned one
// (outlined red where they differ); the replay dims what has not run yet, outlines what runs,
// and puts a cursor under each row.
#include "ui/ActionsLayer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ui/Theme.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {
namespace {

constexpr double kMinItemPx = 3;
constexpr double kMaxFoldPx = 4;  // a dense row folds into cells this wide, shaded by busy share

using K = events::ActionKind;

bool isCommKind(K k) {
  return k == K::RecvForward || k == K::SendForward || k == K::RecvBackward ||
         k == K::SendBackward || k == K::SendForwardRecvBackward || k == K::SendBackwardRecvForward;
}

bool isCompute(K k) {
  return k == K::Forward || k == K::Backward;
}

// Where one drawn item (an action or a folded run of them) is, and its replay state.
struct ItemBox {
  int lane;  // on a split row; -1: across the whole row
  float laneY, laneH;
  int mi;  // the module whose colour it takes
  float x0, x1, top, bottom;
  bool pending, running;
};

ItemBox itemBox(const TimelineContext& ctx, size_t i, const RankReplayState& st,
                const DrawItem& d) {
  const RankRow& row = ctx.run->rows[i];
  const auto& a = ctx.model().actions[row.rank][d.first];
  ItemBox b{};
  // The action's lane on a split row (its module's); folded runs of actions and rank-wide
  // actions span the whole row.
  b.lane = d.folded() ? -1 : row.laneOf(a.module);
  b.laneY = b.lane < 0 ? ctx.rowY[i] : ctx.rowY[i] + ctx.rowH * static_cast<float>(b.lane);
  b.laneH = b.lane < 0 ? ctx.heightOf(i) : ctx.rowH;
  b.mi = b.lane >= 0 ? row.lanes[b.lane].moduleIndex : row.moduleIndex;
  b.x0 = ctx.xOf(static_cast<double>(d.startNs));
  b.x1 = std::max(ctx.xOf(static_cast<double>(d.endNs)), b.x0 + 1.0f);
  b.pending = static_cast<int64_t>(d.first) >= st.done &&
              !(st.running && static_cast<int32_t>(d.first) == st.done);
  b.running = st.running && static_cast<int32_t>(d.first) <= st.done &&
              st.done < static_cast<int32_t>(d.last);
  b.top = b.laneY + 2;
  b.bottom = b.laneY + b.laneH - 2;
  return b;
}

// A dense stretch: its cell shows how busy the rank was there (bubbles dark).
void drawFoldedCell(ImDrawList* dl, const events::ActionRecord& a, const DrawItem& d,
                    const ItemBox& b) {
  const float alpha = b.pending ? 0.30f : 1.0f;
  ImU32 c = b.pending ? theme::actionColour(b.mi, static_cast<int>(a.kind), alpha * 0.75f)
                      : theme::heatColour(d.busy);
  dl->AddRectFilled(ImVec2(b.x0, b.top), ImVec2(b.x1, b.bottom), c);
  if (b.x1 - b.x0 > 40) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%zu", d.last - d.first);
    dl->AddText(ImVec2(b.x0 + 3, b.top + (b.bottom - b.top - 14) / 2), theme::kFoldCount, buf);
  }
}

// The action's name ("F mb3", "F3", "OPT") centred in it, where it fits.
void drawActionLabel(ImDrawList* dl, const events::ActionRecord& a, const ItemBox& b) {
  const float w = b.x1 - b.x0;
  if (isCommKind(a.kind) || w <= 14) return;
  char buf[48];
  if (a.microbatch >= 0) {
    if (w > 70)
      std::snprintf(buf, sizeof buf, "%s mb%d", shortActionName(a.kind), a.microbatch);
    else
      std::snprintf(buf, sizeof buf, "%s%d", shortActionName(a.kind), a.microbatch);
  } else {
    std::snprintf(buf, sizeof buf, "%s", shortActionName(a.kind));
  }
  ImVec2 ts = ImGui::CalcTextSize(buf);
  if (ts.x + 4 >= w) return;
  ImU32 tc = theme::textOn(theme::actionColour(b.mi, static_cast<int>(a.kind)));
  if (b.pending) tc = (tc & 0x00ffffff) | (110u << 24);
  dl->AddText(ImVec2(b.x0 + (w - ts.x) / 2, b.top + (b.bottom - b.top - ts.y) / 2), tc, buf);
}

// A few forward/backward blocks wholly in view, for the GUI test's pixel checks.
void probeAction(FrameProbes& probes, const TimelineContext& ctx, size_t i, size_t index,
                 const events::ActionRecord& a, const ItemBox& b) {
  const float w = b.x1 - b.x0;
  if (!isCompute(a.kind) || b.pending) return;
  const bool inX = b.x0 > ctx.area0.x + 2 && b.x1 < ctx.area1.x - 2;
  const int rank = ctx.run->rows[i].rank;
  const ImU32 colour = theme::actionColour(b.mi, static_cast<int>(a.kind));
  const float y = ctx.rowY[i];
  if (w > 16 && probes.items.size() < 16 && inX && y > ctx.area0.y && y + ctx.rowH < ctx.area1.y)
    probes.items.push_back(
        {rank, static_cast<int64_t>(index), ImVec4(b.x0, b.top, b.x1, b.bottom), colour});
  if (b.lane >= 0 && w > 8 && probes.laneItems.size() < 32 && inX && b.laneY > ctx.area0.y &&
      b.laneY + b.laneH < ctx.area1.y)
    probes.laneItems.push_back({rank, b.lane, b.mi, ImVec4(b.x0, b.top, b.x1, b.bottom), colour});
}

// The plan overlay of a stagescope run: the planned action's colour along the top, outlined
// red (and named, where there is room) where the action differs from it.
void drawPlannedAction(ImDrawList* dl, const events::ActionRecord& a,
                       const events::ActionRecord& pa, const ItemBox& b) {
  dl->AddRectFilled(ImVec2(b.x0, b.laneY), ImVec2(b.x1, b.laneY + 3),
                    theme::actionColour(b.mi, static_cast<int>(pa.kind), 0.9f));
  if (pa.kind == a.kind && pa.microbatch == a.microbatch && pa.module == a.module) return;
  dl->AddRect(ImVec2(b.x0 - 1, b.laneY), ImVec2(b.x1 + 1, b.laneY + b.laneH), theme::kBad, 0, 0,
              2.5f);
  if (b.x1 - b.x0 > 30) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "plan %s%d", shortActionName(pa.kind), pa.microbatch);
    dl->AddText(ImVec2(b.x0 + 2, b.laneY + b.laneH + 0), theme::kBad, buf);
  }
}

}  // namespace

const char* shortActionName(events::ActionKind k) {
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

void ActionsLayer::drawBusyRow(const TimelineContext& ctx, int rank, const RankReplayState& st,
                               const ImVec2& p0, const ImVec2& p1) {
  const LoadedRun& run = *ctx.run;
  const double nsPerPx = ctx.nsPerPx;
  const TimeColumns& times = run.actionTimes[rank];
  const auto& model = run.model;
  // Only the run's span is shaded: before a rank's first action inside it is a bubble too.
  const double from = std::max(ctx.view->viewStart, static_cast<double>(model.minTimeNs));
  const double to = std::min(ctx.view->viewEnd, static_cast<double>(model.maxTimeNs));
  if (to <= from) return;
  const int c0 = static_cast<int>(std::floor((from - ctx.view->viewStart) / nsPerPx));
  const int c1 = std::min(static_cast<int>(std::ceil((to - ctx.view->viewStart) / nsPerPx)),
                          static_cast<int>(p1.x - p0.x));
  if (c1 <= c0) return;
  // The shares depend only on the run, the rank and the columns' times: a frame that shows the
  // same columns as the last one (hover, replay, a static view) reuses them.
  if (busyCache_.size() <= static_cast<size_t>(rank)) busyCache_.resize(rank + 1);
  BusyCache& cache = busyCache_[rank];
  const double colT0 = ctx.view->viewStart + c0 * nsPerPx;
  if (cache.run != &run || cache.t0 != colT0 || cache.nsPerPx != nsPerPx ||
      cache.columns != c1 - c0) {
    busyPerColumn(times, colT0, nsPerPx, c1 - c0, cache.busy);
    cache.run = &run;
    cache.t0 = colT0;
    cache.nsPerPx = nsPerPx;
    cache.columns = c1 - c0;
  }
  const std::vector<float>& busy = cache.busy;
  // The replay: actions from st.done on have not run yet at this step (dimmed).
  int pendingCol = c1;
  if (st.done >= 0 && static_cast<size_t>(st.done) < times.size())
    pendingCol = std::clamp(static_cast<int>(std::floor(
                                (static_cast<double>(times.startNs[static_cast<size_t>(st.done)]) -
                                 ctx.view->viewStart) /
                                nsPerPx)),
                            c0, c1);
  // Neighbouring columns of the same shade (steps of 1/32) and replay state are one rectangle.
  const auto level = [&](int c) {
    return static_cast<int>(busy[static_cast<size_t>(c - c0)] * 32 + 0.5f);
  };
  for (int c = c0; c < c1;) {
    const int l = level(c);
    const bool pending = c >= pendingCol;
    int e = c + 1;
    while (e < c1 && level(e) == l && (e >= pendingCol) == pending) ++e;
    ImU32 colour = theme::heatColour(static_cast<float>(l) / 32);
    if (pending) colour = (colour & 0x00ffffffu) | (80u << 24);
    ctx.dl->AddRectFilled(ImVec2(p0.x + static_cast<float>(c), p0.y),
                          ImVec2(p0.x + static_cast<float>(e), p1.y), colour);
    c = e;
  }
  ctx.probes->busyRows.push_back(
      {rank, ImVec4(p0.x + static_cast<float>(c0), p0.y, p0.x + static_cast<float>(c1), p1.y)});
}

TimelineHover ActionsLayer::drawDenseRow(const TimelineContext& ctx, size_t i,
                                         const RankReplayState& st) {
  // More actions in view than could each be kMinItemPx wide: the row is its busy share per
  // pixel column (at most one primitive per column), bubbles dark, busy stretches bright.
  const int rank = ctx.run->rows[i].rank;
  const float y = ctx.rowY[i], rowHt = ctx.heightOf(i);
  const TimeColumns& times = ctx.run->actionTimes[rank];
  drawBusyRow(ctx, rank, st, ImVec2(ctx.area0.x, y + 2), ImVec2(ctx.area1.x, y + rowHt - 2));
  TimelineHover hover;
  if (ctx.rowHovered(i)) {
    const double c0 = ctx.view->viewStart + std::floor(ctx.mouse.x - ctx.area0.x) * ctx.nsPerPx;
    const IndexRange under = visibleRange(times, static_cast<int64_t>(c0),
                                          static_cast<int64_t>(std::ceil(c0 + ctx.nsPerPx)));
    if (under.size() > 0) {
      hover.what = {Selection::Kind::Action, rank, static_cast<int64_t>(under.first)};
      hover.folded = under.size() > 1 ? under.size() : 0;
      hover.foldStart = times.startNs[under.first];
      hover.foldEnd = times.endNs[under.last - 1];
    }
  }
  const auto& acts = ctx.model().actions[rank];
  if (ctx.view->selection.kind == Selection::Kind::Action && ctx.view->selection.rank == rank &&
      ctx.view->selection.index >= 0 &&
      ctx.view->selection.index < static_cast<int64_t>(acts.size())) {
    const auto& a = acts[ctx.view->selection.index];
    const float x0 = ctx.xOf(static_cast<double>(a.startNs));
    const float x1 = std::max(ctx.xOf(static_cast<double>(a.endNs)), x0 + 3.0f);
    ctx.dl->AddRect(ImVec2(x0 - 2, y), ImVec2(x1 + 2, y + rowHt), theme::kSelected, 0, 0, 2);
  }
  return hover;
}

bool ActionsLayer::drawActionItem(const TimelineContext& ctx, size_t i, const RankReplayState& st,
                                  const DrawItem& d, float* prevX1) {
  ImDrawList* dl = ctx.dl;
  const int rank = ctx.run->rows[i].rank;
  const auto& a = ctx.model().actions[rank][d.first];
  ItemBox b = itemBox(ctx, i, st, d);
  const float y = ctx.rowY[i], rowHt = ctx.heightOf(i);
  if (ctx.view->showIdle && b.x0 - *prevX1 > 6 && *prevX1 > ctx.area0.x - 1e6f)
    dl->AddRectFilled(ImVec2(*prevX1, y + rowHt - 4), ImVec2(b.x0, y + rowHt - 1), theme::kIdleGap);
  *prevX1 = b.x1;
  if (d.folded()) {
    drawFoldedCell(dl, a, d, b);
  } else {
    if (isCommKind(a.kind)) b.top = b.laneY + b.laneH * 0.5f;
    const float alpha = b.pending ? 0.30f : 1.0f;
    dl->AddRectFilled(ImVec2(b.x0, b.top), ImVec2(b.x1, b.bottom),
                      theme::actionColour(b.mi, static_cast<int>(a.kind), alpha), 1.5f);
    drawActionLabel(dl, a, b);
    probeAction(*ctx.probes, ctx, i, d.first, a, b);
    const auto& plans = ctx.model().plan;
    const auto* plan = rank < static_cast<int>(plans.size()) ? &plans[rank] : nullptr;
    if (ctx.view->showPlan && plan && d.first < plan->size())
      drawPlannedAction(dl, a, (*plan)[d.first], b);
  }
  if (b.running)
    dl->AddRect(ImVec2(b.x0 - 1, b.laneY + 1), ImVec2(b.x1 + 1, b.laneY + b.laneH - 1),
                theme::kAccent, 0, 0, 2);
  if (ctx.view->selection.kind == Selection::Kind::Action && ctx.view->selection.rank == rank &&
      ctx.view->selection.index >= static_cast<int64_t>(d.first) &&
      ctx.view->selection.index < static_cast<int64_t>(d.last))
    dl->AddRect(ImVec2(b.x0 - 2, b.laneY), ImVec2(b.x1 + 2, b.laneY + b.laneH), theme::kSelected, 0,
                0, 2);
  const ImVec2 m = ctx.mouse;
  return ctx.rowHovered(i) && m.x >= b.x0 - 1 && m.x <= b.x1 + 1 && m.y >= b.laneY &&
         m.y < b.laneY + b.laneH;
}

TimelineHover ActionsLayer::drawRow(const TimelineContext& ctx, size_t i,
                                    const RankReplayState& st) {
  const int rank = ctx.run->rows[i].rank;
  const TimeColumns& times = ctx.run->actionTimes[rank];
  const IndexRange range = visibleRange(times, ctx.vStart, ctx.vEnd);
  drawScratch_.clear();
  TimelineHover hover;
  if (static_cast<double>(range.size()) * kMinItemPx > ctx.areaW)
    hover = drawDenseRow(ctx, i, st);
  else
    foldRange(times, range, ctx.nsPerPx, kMinItemPx, drawScratch_, kMaxFoldPx);
  float prevX1 = -1e9f;
  for (const DrawItem& d : drawScratch_) {
    if (!drawActionItem(ctx, i, st, d, &prevX1)) continue;
    hover.what = {Selection::Kind::Action, rank, static_cast<int64_t>(d.first)};
    hover.folded = d.folded() ? d.last - d.first : 0;
    hover.foldStart = d.startNs;
    hover.foldEnd = d.endNs;
  }
  return hover;
}

void drawReplayCursor(const TimelineContext& ctx, size_t i, const RankReplayState& st) {
  const auto& acts = ctx.model().actions[ctx.run->rows[i].rank];
  if (ctx.step <= 0 || acts.empty()) return;
  const int64_t t = st.running ? acts[st.done].startNs
                               : (st.done > 0 ? acts[st.done - 1].endNs : acts.front().startNs);
  const float x = ctx.xOf(static_cast<double>(t));
  const float bottom = ctx.rowY[i] + ctx.heightOf(i);
  ctx.dl->AddTriangleFilled(ImVec2(x - 5, bottom), ImVec2(x + 5, bottom), ImVec2(x, bottom - 7),
                            theme::kAccent);
}

}  // namespace stagescope::ui
