// The timeline's rows layer: one row per rank (RankRows order) on alternating backgrounds, a
// header band above each module's group, and the labels column at the left.  A colocated
// rank's row is split into one lane per module it holds (each tinted in its module's colour,
// one label per lane, a "shared" badge).  A rank that did not complete has its fate as a badge
// in its label; a rank running at the replay step a dot.
#include "ui/RowsLayer.h"

#include <algorithm>
#include <cstdio>

#include "ui/FitText.h"
#include "ui/Theme.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {
namespace {

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
  const ImVec2 b0(at.x + kTimelineLabelWidth - 4 - w, at.y + 3),
      b1(at.x + kTimelineLabelWidth - 4, at.y + h - 3);
  dl->AddRectFilled(b0, b1, theme::kSharedBadge, 3);
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

// The header band above the first row of a module's group: its colour, name and layout.
void drawModuleHeader(const TimelineContext& ctx, size_t i) {
  const RankRow& row = ctx.run->rows[i];
  const auto& model = ctx.model();
  ImDrawList* dl = ctx.dl;
  const float y = ctx.rowY[i], x0 = ctx.pos.x, x1 = ctx.area1.x;
  const float hy = y - kTimelineHeaderHeight;
  const int mi = row.moduleIndex;
  dl->AddRectFilled(ImVec2(x0, hy), ImVec2(x1, y), theme::kHeaderBand);
  dl->AddRectFilled(ImVec2(x0, hy), ImVec2(x0 + 4, y), theme::moduleColour(mi, false));
  char buf[160];
  if (row.shared()) {
    std::snprintf(buf, sizeof buf, "shared ranks: %s   (one 1F1B order per rank)",
                  model.moduleLabel(row.rank).c_str());
  } else if (mi >= 0) {
    const auto& mod = model.info.modules[mi];
    std::snprintf(buf, sizeof buf, "%s  (%s)   tp%d x pp%d x dp%d  @%d", mod.name.c_str(),
                  mod.kind.c_str(), mod.tp, mod.pp, mod.dp, mod.offset);
  } else {
    std::snprintf(buf, sizeof buf, "(no module)");
  }
  dl->AddText(ImVec2(x0 + 10, hy + 1), theme::kText, buf);
}

// A rank that did not complete: its fate as a badge at the label's right end.  Returns the
// badge's left edge (the label column's right edge when there is none).
float drawFateBadge(const TimelineContext& ctx, size_t i) {
  const float right = ctx.pos.x + kTimelineLabelWidth - 4;
  const RankProblem* fateOf = ctx.run->fateOf(ctx.run->rows[i].rank);  // none while loading
  if (!fateOf || fateOf->fate == RankFate::Completed) return right;
  const float y = ctx.rowY[i], rowHt = ctx.heightOf(i);
  const RankFate fate = fateOf->fate;
  const char* word = toString(fate);
  const ImVec2 ws = ImGui::CalcTextSize(word);
  const ImVec2 b1(ctx.pos.x + kTimelineLabelWidth - 4, y + rowHt / 2 + ws.y / 2 + 1);
  const ImVec2 b0(b1.x - ws.x - 8, y + rowHt / 2 - ws.y / 2 - 1);
  ctx.dl->AddRectFilled(b0, b1, theme::fateColour(fate), 3);
  ctx.dl->AddText(ImVec2(b0.x + 4, b0.y + 1), theme::textOn(theme::fateColour(fate)), word);
  return b0.x;
}

// A row's label ("llm  tp1 pp2 dp0  r7") shortened to fit `width` pixels so that a fate badge
// never covers it: whole; else without its module name (the module's header row names it);
// else cut, ending in "...".
std::string fittedLabel(const std::string& label, float width) {
  if (ImGui::CalcTextSize(label.c_str()).x <= width) return label;
  std::string s = label;
  if (const size_t gap = s.find("  "); gap != std::string::npos)
    s = s.substr(s.find_first_not_of(' ', gap));
  return elideEnd(s, width);
}

}  // namespace

void drawRowBackgrounds(const TimelineContext& ctx) {
  ImDrawList* dl = ctx.dl;
  const float x0 = ctx.pos.x, x1 = ctx.area1.x;
  for (size_t i = 0; i < ctx.run->rows.size(); ++i) {
    const float y = ctx.rowY[i], rowHt = ctx.heightOf(i);
    if (y > ctx.area1.y || y + rowHt < ctx.area0.y - kTimelineHeaderHeight) continue;
    const RankRow& row = ctx.run->rows[i];
    dl->AddRectFilled(ImVec2(x0, y), ImVec2(x1, y + rowHt), (i & 1) ? theme::kRowB : theme::kRowA);
    if (row.shared()) {
      // A split row: each lane tinted in its module's colour, separated by a thin line.
      for (size_t l = 0; l < row.lanes.size(); ++l) {
        const float ly = y + ctx.rowH * static_cast<float>(l);
        dl->AddRectFilled(ImVec2(x0, ly), ImVec2(x1, ly + ctx.rowH),
                          theme::moduleColour(row.lanes[l].moduleIndex, false, 0.07f));
        if (l > 0) dl->AddLine(ImVec2(x0, ly), ImVec2(x1, ly), theme::kLaneSeparator);
      }
    }
    if (row.firstOfModule) drawModuleHeader(ctx, i);
  }
}

void drawRowLabels(const TimelineContext& ctx) {
  ImDrawList* dl = ctx.dl;
  const float x0 = ctx.pos.x;
  for (size_t i = 0; i < ctx.run->rows.size(); ++i) {
    if (!ctx.rowVisible(i)) continue;
    const float y = ctx.rowY[i], rowHt = ctx.heightOf(i);
    const RankRow& row = ctx.run->rows[i];
    const int rank = row.rank;
    const RankReplayState st = ctx.run->replay.stateAt(rank, ctx.step);
    dl->AddRectFilled(ImVec2(x0, y), ImVec2(x0 + kTimelineLabelWidth, y + rowHt),
                      (i & 1) ? theme::kLabelRowB : theme::kLabelRowA);
    ImU32 tc = theme::kText;
    if (ctx.view->selection.rank == rank) tc = theme::kAccent;
    // Where the running dot goes: the label's right end; a split row's badge's bottom.
    ImVec2 dot(x0 + kTimelineLabelWidth - 10, y + rowHt / 2);
    if (row.shared()) {
      const ImVec4 badge = drawSharedRowLabel(dl, row, ImVec2(x0, y), ctx.rowH, tc);
      dot = ImVec2((badge.x + badge.z) / 2, badge.w - 7);
    }
    const float badgeLeft = drawFateBadge(ctx, i);
    if (!row.shared()) {
      dl->AddRectFilled(ImVec2(x0, y + 1), ImVec2(x0 + 4, y + ctx.rowH - 1),
                        theme::moduleColour(row.moduleIndex, false));
      const std::string label = fittedLabel(row.label, badgeLeft - 4 - (x0 + 10));
      dl->AddText(ImVec2(x0 + 10, y + (ctx.rowH - 15) / 2), tc, label.c_str());
      ctx.probes->rowLabels.push_back(
          {rank, x0 + 10 + ImGui::CalcTextSize(label.c_str()).x, badgeLeft});
    }
    if (st.running) dl->AddCircleFilled(dot, 4, theme::kAccent);
  }
}

}  // namespace stagescope::ui
