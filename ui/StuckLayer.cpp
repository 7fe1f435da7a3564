// The timeline's problems layer: a rank that did not complete gets its stuck action (the
// first planned action it never completed) after its last recorded one, hatched in the colour
// of its fate and labelled with what it waited for and for how long; the wait-for graph is an
// arrow from each stuck action to the rank it waits on, in the cycle colour and named
// ("cycle r1 -> r2 -> r1") where the waits form a cycle.
#include "ui/StuckLayer.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "ui/FitText.h"
#include "ui/Formatting.h"
#include "ui/Theme.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {
namespace {

// "hung in SF it1 mb2, waits on r3 · 5.0 s": how the rank ended, where, and how long it was
// stuck from its last completed action (at `from`).
std::string stuckLabel(const model::RunModel& model, int rank, const RankProblem& fate,
                       int64_t from) {
  std::string label = toString(fate.fate);
  const auto* plan = rank < static_cast<int>(model.plan.size()) ? &model.plan[rank] : nullptr;
  if (plan && fate.stuckPlan >= 0 && fate.stuckPlan < static_cast<int32_t>(plan->size())) {
    // A hung rank recorded everything up to the wait it timed out in; a rank that was
    // killed or stopped may have lost its last uncommitted records.
    const auto& pa = (*plan)[fate.stuckPlan];
    char buf[96];
    std::snprintf(buf, sizeof buf,
                  fate.fate == RankFate::Hung ? " in %s it%d%s" : ": next planned %s it%d%s",
                  shortActionName(pa.kind), pa.iteration, microbatchSuffix(pa.microbatch).c_str());
    label += buf;
  }
  if (fate.waitsOnRank >= 0) label += ", waits on r" + std::to_string(fate.waitsOnRank);
  label += " · " + formatDuration(static_cast<double>(std::max(fate.stuckUntilNs, from) - from));
  return label;
}

// The rank's fate when it did not complete and the replay is past its last action; else null.
const RankProblem* stuckFate(const LoadedRun& run, int rank, const RankReplayState& st) {
  const RankProblem* fate = run.fateOf(rank);  // none while the details load
  if (!fate || fate->fate == RankFate::Completed) return nullptr;
  return st.done >= static_cast<int32_t>(run.model.actions[rank].size()) ? fate : nullptr;
}

int64_t stuckFrom(const model::RunModel& model, int rank) {
  const auto& acts = model.actions[rank];
  return acts.empty() ? model.minTimeNs : acts.back().endNs;
}

// The cycle's name beside its first edge, on a dark plate so it reads over the blocks.
void drawCycleLabel(ImDrawList* dl, const ImVec2& from, const ImVec2& to, const std::string& text) {
  const ImVec2 size = ImGui::CalcTextSize(text.c_str());
  const ImVec2 at(std::max(from.x, to.x) + 10, (from.y + to.y) / 2 - size.y / 2);
  dl->AddRectFilled(ImVec2(at.x - 3, at.y - 1), ImVec2(at.x + size.x + 3, at.y + size.y + 1),
                    theme::kLabelBackdrop, 3);
  dl->AddText(at, theme::kCycle, text.c_str());
}

}  // namespace

Selection drawStuck(const TimelineContext& ctx, size_t i, const RankReplayState& st,
                    StuckRects& stuckRect) {
  const auto& model = ctx.model();
  const int rank = ctx.run->rows[i].rank;
  const RankProblem* fate = stuckFate(*ctx.run, rank, st);
  if (!fate) return {};
  ImDrawList* dl = ctx.dl;
  const float y = ctx.rowY[i], rowHt = ctx.heightOf(i);
  const int64_t from = stuckFrom(model, rank);
  const float sx0 = ctx.xOf(static_cast<double>(from));
  const float sx1 =
      std::max(ctx.xOf(static_cast<double>(std::max(model.maxTimeNs, from))), sx0 + 60);
  const ImU32 fc = theme::fateColour(fate->fate);
  const ImVec2 s0(sx0 + 1, y + 2), s1(sx1, y + rowHt - 2);
  dl->AddRectFilled(s0, s1, (fc & 0x00ffffffu) | (70u << 24), 1.5f);
  dl->PushClipRect(s0, s1, true);
  for (float hx = s0.x - rowHt; hx < s1.x; hx += 9)  // hatching: not a completed action
    dl->AddLine(ImVec2(hx, s1.y), ImVec2(hx + rowHt, s0.y), (fc & 0x00ffffffu) | (120u << 24), 1);
  dl->PopClipRect();
  dl->AddRect(s0, s1, fc, 1.5f, 0, 2.5f);
  // The block ends where the run's records end; the rank waited on until its wait gave up
  // (stuckUntilNs), often seconds later: drawn to scale, that would squeeze the whole schedule
  // into a sliver.  So the block is cut, and the cut is shown: a break (two slanted strokes
  // across it) and "not to scale" in its label.
  const int64_t drawnUntil = std::max(model.maxTimeNs, from);
  const bool broken = fate->stuckUntilNs > drawnUntil &&
                      fate->stuckUntilNs - from > 2 * std::max<int64_t>(1, drawnUntil - from);
  if (broken) {
    const float bx = s1.x - 16;
    for (float off : {0.0f, 6.0f}) {
      dl->AddLine(ImVec2(bx + off - 4, s1.y + 2), ImVec2(bx + off + 4, s0.y - 2),
                  theme::kBackground, 4.0f);
      dl->AddLine(ImVec2(bx + off - 4, s1.y + 2), ImVec2(bx + off + 4, s0.y - 2), fc, 1.5f);
    }
    ctx.probes->stuckBreaks.push_back(rank);
  }
  // The label and the arrows start at the visible part of the block; a label longer than that
  // part ends in "..." ("hung in SF_" read as a whole word), the inspector says it all.
  const float visibleX0 = std::max(s0.x, ctx.area0.x);
  const float room = std::min(s1.x - (broken ? 24.0f : 0.0f), ctx.area1.x) - visibleX0 - 10;
  const std::string label =
      elideEnd(stuckLabel(model, rank, *fate, from) + (broken ? " (not to scale)" : ""), room);
  dl->PushClipRect(s0, s1, true);
  if (room > ImGui::CalcTextSize("h...").x)
    dl->AddText(ImVec2(visibleX0 + 5, y + (rowHt - ImGui::GetTextLineHeight()) / 2),
                theme::kStuckText, label.c_str());
  dl->PopClipRect();
  stuckRect[rank] = ImVec4(visibleX0, s0.y, s1.x, s1.y);
  ctx.probes->stuck.push_back({rank, stuckRect[rank], fc});
  if (ctx.view->selection.kind == Selection::Kind::Stuck && ctx.view->selection.rank == rank)
    dl->AddRect(ImVec2(s0.x - 2, s0.y - 2), ImVec2(s1.x + 2, s1.y + 2), theme::kSelected, 0, 0, 2);
  if (ctx.rowHovered(i) && ctx.mouse.x >= s0.x && ctx.mouse.x <= s1.x)
    return {Selection::Kind::Stuck, rank, -1};
  return {};
}

void stuckTooltip(const TimelineContext& ctx, int rank) {
  const RankProblem& fate = *ctx.run->fateOf(rank);
  const int64_t from = stuckFrom(ctx.model(), rank);
  ImGui::BeginTooltip();
  ImGui::Text("rank %d %s", rank, stuckLabel(ctx.model(), rank, fate, from).c_str());
  if (!fate.why.empty()) ImGui::TextDisabled("%s", fate.why.c_str());
  ImGui::EndTooltip();
}

void drawWaits(const TimelineContext& ctx, const StuckRects& stuckRect) {
  // The wait-for graph: an arrow from each stuck action to the rank it waits on (to that
  // rank's stuck action, or to the end of its last action).
  const auto& model = ctx.model();
  ImDrawList* dl = ctx.dl;
  for (const WaitEdge& w : ctx.run->problems.waits) {
    const ImVec4 a = stuckRect[w.rank];
    if (a.z < a.x) continue;
    const int row = ctx.run->rowOfRank[w.waitsOn];
    if (row < 0) continue;
    // Leave from the left part of the stuck action, arrive further right on the target, so
    // the two arrows of a cycle stay apart.
    const bool down = ctx.rowY[row] > a.y;
    ImVec2 from(a.x + std::min(24.0f, (a.z - a.x) / 4), down ? a.w : a.y);
    ImVec2 to;
    const ImVec4 b = stuckRect[w.waitsOn];
    if (b.z >= b.x) {
      to = ImVec2(b.x + std::min(70.0f, (b.z - b.x) / 2), down ? b.y : b.w);
    } else {
      const auto& target = model.actions[w.waitsOn];
      const double t = target.empty() ? static_cast<double>(model.minTimeNs)
                                      : static_cast<double>(target.back().endNs);
      to = ImVec2(ctx.xOf(t),
                  ctx.rowY[row] + (down ? 2 : ctx.heightOf(static_cast<size_t>(row)) - 2));
    }
    // A wait that is part of a cycle is drawn in the cycle colour (none of its ranks can
    // proceed); a wait on a rank outside any cycle (killed, missing, busy) stays red.
    const ImU32 colour = w.inCycle ? theme::kCycle : theme::kBad;
    const float dy = (to.y - from.y) * 0.5f;
    const ImVec2 c1(from.x, from.y + dy), c2(to.x, to.y - dy);
    dl->AddBezierCubic(from, c1, c2, to, theme::kArrowShadow, 5.0f);
    dl->AddBezierCubic(from, c1, c2, to, colour, 3.0f);
    arrowHead(dl, c2, to, colour, 11);
    dl->AddCircleFilled(from, 4, colour);
    if (!w.cycleLabel.empty()) drawCycleLabel(dl, from, to, w.cycleLabel);
    ctx.probes->waits.push_back({w.rank, w.waitsOn, from, to, w.inCycle});
  }
}

}  // namespace stagescope::ui
