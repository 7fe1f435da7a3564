// The timeline's transfers layer: an arrow from each send's start to its receive's end (in
// the activation, gradient or bridge colour; red where the two sides disagree; the replay's
// in-flight messages highlighted).  On a split (colocated) row the arrow leaves the sender
// module's lane and enters the receiver module's; a local hand-off between two modules of one
// rank is a loop on its row, labelled "local".  Zoomed out only in-flight and selected
// messages are drawn.
#include "ui/TransfersLayer.h"

#include <algorithm>
#include <cmath>

#include "ui/Theme.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {
namespace {

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

ImU32 arrowColour(const events::TransferRecord& t, const model::TransferPair& pair) {
  ImU32 col = t.direction == events::Direction::Activation ? theme::kP2P : theme::kGradArrow;
  if (t.edgeKind == events::EdgeKind::Bridge) col = theme::kBridge;
  if (!pair.sidesAgree()) col = theme::kBad;
  return col;
}

// The closest arrow under the mouse (within 5 px): its transfer.
struct ArrowHover {
  float best = 5;
  Selection what;
  void offer(float d, const events::TransferRecord& t, int64_t send) {
    if (d >= best) return;
    best = d;
    what = {Selection::Kind::Transfer, t.rank, send};
  }
};

// The visible pairs' positions in pairsBySendStart, [lo, hi); `dense` when there are too
// many to draw them all.
struct ArrowRange {
  size_t lo, hi;
  bool dense;
};

ArrowRange arrowRange(const TimelineContext& ctx, int32_t selectedPair) {
  const LoadedRun* run = ctx.run;
  const auto& starts = run->pairSendStart;
  const double span = ctx.viewEnd - ctx.viewStart;
  auto lo =
      std::lower_bound(starts.begin(), starts.end(), static_cast<int64_t>(ctx.viewStart - span));
  auto hi = std::upper_bound(starts.begin(), starts.end(), static_cast<int64_t>(ctx.viewEnd));
  const bool dense = static_cast<float>(hi - lo) > (ctx.area1.x - ctx.area0.x) / 10;
  // Zoomed out (dense) only in-flight and selected messages are drawn; with no replay step in
  // progress nothing is in flight, so the visible pairs need not be visited at all (at 10^6
  // events they are ~10^5 per frame).
  const bool replayMid = ctx.step > 0 && ctx.step < static_cast<int64_t>(run->replay.size());
  if (dense && !replayMid) lo = hi;
  if (dense && !replayMid && selectedPair >= 0) {
    const PairActions& sp = run->pairActions[selectedPair];
    if (sp.sendAction >= 0 && sp.recvAction >= 0) {
      // The selected pair's position in pairsBySendStart: among those with its send start.
      const int64_t t0 = ctx.model().actions[sp.sendRank][sp.sendAction].startNs;
      auto first = std::lower_bound(starts.begin(), starts.end(), t0);
      for (auto it = first; it != starts.end() && *it == t0; ++it)
        if (run->pairsBySendStart[it - starts.begin()] == selectedPair) {
          lo = it;
          hi = it + 1;
        }
    }
  }
  return {static_cast<size_t>(lo - starts.begin()), static_cast<size_t>(hi - starts.begin()),
          dense};
}

}  // namespace

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

namespace {

// drawLocalLoop and drawStraightArrow return the mouse's distance from the arrow (far when it
// is outside the rows).
float drawLocalLoop(const TimelineContext& ctx, const TimelineArrow& arrow,
                    const events::TransferRecord& t, float* lastLabel) {
  // A local hand-off never left the rank: a loop on its row from the sender's lane to the
  // receiver's, labelled.
  ImDrawList* dl = ctx.dl;
  const ImVec2 a = arrow.a, b = arrow.b;
  const float bulge = std::max(18.0f, std::fabs(b.y - a.y) * 0.6f);
  const float right = std::max(a.x, b.x) + bulge;
  const ImVec2 c1(right, a.y), c2(right, b.y);
  dl->AddBezierCubic(a, c1, c2, b, arrow.col, arrow.thick + 0.8f);
  arrowHead(dl, c2, b, arrow.col, 7);
  const ImVec2 at(right - bulge * 0.25f + 2, (a.y + b.y) / 2 - ImGui::GetTextLineHeight() / 2);
  if (at.x - *lastLabel > 80 || arrow.inFlight || arrow.selected) {
    dl->AddText(at, arrow.col, "local");
    *lastLabel = at.x;
  }
  if (ctx.probes->locals.size() < 16 && a.x > ctx.area0.x && right + 40 < ctx.area1.x)
    ctx.probes->locals.push_back({t.rank, a, b, arrow.col});
  if (!ctx.mouseInArea()) return 1e9f;
  const ImVec2 mid(0.125f * a.x + 0.375f * c1.x + 0.375f * c2.x + 0.125f * b.x,
                   0.125f * a.y + 0.375f * c1.y + 0.375f * c2.y + 0.125f * b.y);
  return std::min(segmentDistance(ctx.mouse, a, mid), segmentDistance(ctx.mouse, mid, b));
}

float drawStraightArrow(const TimelineContext& ctx, const TimelineArrow& arrow,
                        const events::TransferRecord& t) {
  if (t.edgeKind == events::EdgeKind::Bridge)
    dashedLine(ctx.dl, arrow.a, arrow.b, arrow.col, arrow.thick + 0.6f);
  else
    ctx.dl->AddLine(arrow.a, arrow.b, arrow.col, arrow.thick);
  arrowHead(ctx.dl, arrow.a, arrow.b, arrow.col, 7);
  return ctx.mouseInArea() ? segmentDistance(ctx.mouse, arrow.a, arrow.b) : 1e9f;
}

}  // namespace

Selection drawArrows(const TimelineContext& ctx) {
  const LoadedRun* run = ctx.run;
  const auto& model = ctx.model();
  const int64_t selectedTransfer =
      ctx.view->selection.kind == Selection::Kind::Transfer ? ctx.view->selection.index : -1;
  const int32_t selectedPair = selectedTransfer >= 0 ? run->transferPair[selectedTransfer] : -1;
  const ArrowRange range = arrowRange(ctx, selectedPair);
  const bool dense = range.dense;
  const int64_t step = ctx.step;
  const float rowH = ctx.rowH;
  std::vector<float> lastLocalLabel(run->rows.size(), -1e9f);  // per row: one label per 80 px
  ArrowHover hover;
  for (size_t it = range.lo; it != range.hi; ++it) {
    const int32_t p = run->pairsBySendStart[it];
    const PairActions& pa = run->pairActions[p];
    const auto& sa = model.actions[pa.sendRank][pa.sendAction];
    const auto& ra = model.actions[pa.recvRank][pa.recvAction];
    if (static_cast<double>(ra.endNs) < ctx.view->viewStart) continue;
    TimelineArrow arrow{};
    arrow.inFlight = step > 0 && run->replay.positionOf(pa.sendRank, pa.sendAction, false) < step &&
                     run->replay.positionOf(pa.recvRank, pa.recvAction, true) >= step;
    arrow.selected = p == selectedPair;
    if (dense && !arrow.inFlight && !arrow.selected) continue;
    const int rs = run->rowOfRank[pa.sendRank], rr = run->rowOfRank[pa.recvRank];
    if (rs < 0 || rr < 0) continue;
    const auto& pair = model.pairs[p];
    const auto& t = model.transfers[pair.send];
    // On a split (colocated) row the arrow leaves the sender module's lane and enters the
    // receiver module's.
    const auto [srcModule, dstModule] = model::edgeModules(t);
    const int ls = std::max(0, run->rows[rs].laneOf(srcModule));
    const int lr = std::max(0, run->rows[rr].laneOf(dstModule));
    const float ys = ctx.rowY[rs] + rowH * static_cast<float>(ls);
    const float yr = ctx.rowY[rr] + rowH * static_cast<float>(lr);
    arrow.a = ImVec2(ctx.xOf(static_cast<double>(sa.startNs)), ys + rowH * 0.75f);
    arrow.b = ImVec2(ctx.xOf(static_cast<double>(ra.endNs)), yr + rowH * (yr > ys ? 0.5f : 0.95f));
    arrow.col = arrowColour(t, pair);
    arrow.thick = 1.2f;
    if (arrow.inFlight) {
      arrow.col = theme::kAccent;
      arrow.thick = 2.2f;
    }
    if (arrow.selected) {
      arrow.col = theme::kSelected;
      arrow.thick = 2.5f;
    }
    const float d = model::isLocalHandOff(t) ? drawLocalLoop(ctx, arrow, t, &lastLocalLabel[rs])
                                             : drawStraightArrow(ctx, arrow, t);
    hover.offer(d, t, pair.send);
  }
  if (dense) {
    const char* msg = "transfers: zoom in to see arrows";
    ctx.dl->AddText(ImVec2(ctx.area1.x - ImGui::CalcTextSize(msg).x - 8, ctx.area1.y - 20),
                    theme::kTextDim, msg);
  }
  return hover.what;
}

}  // namespace stagescope::ui
