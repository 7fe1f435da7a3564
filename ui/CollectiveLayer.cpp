// Collectives of captured runs on the timeline, and their inspector section.
//
// Each member's record is a bar in the lower part of its rank's row, from when that rank
// posted the collective to when it saw it complete.  The members of one collective
// (analysis::collectiveInstances: same group, members, iteration and number) are tied by a
// band spanning the group's rows at the moment the last member joined (until the first
// member finished): a solid line with a dot on each member's bar, labelled
// "op group #k it<i>".  Bars of an instance whose results differ (or whose ops differ) are
// outlined red; a member that never completed is hatched in red.  The inspector lists the
// group, its members, bytes and each member's checksums, and says whether they agree.
#include "ui/CollectiveLayer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ui/Formatting.h"
#include "ui/Theme.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {
namespace {

bool isBad(const analysis::CollectiveInstance& c) {
  return c.agreement == analysis::CollectiveAgreement::Differ;
}

std::string title(const analysis::CollectiveInstance& c) {
  return c.op + " " + c.group + " #" + std::to_string(c.groupSeq) + " it" +
         std::to_string(c.iteration);
}

bool unfinished(const events::CollectiveRecord& r) {
  return r.endNs == 0 || r.state == "failed" || r.state == "pending";
}

}  // namespace

// One instance's members as drawn: the rows' extent they span, each member bar's middle, and
// where the first member finished.
struct CollectiveBars {
  float top = 1e9f, bottom = -1e9f;
  std::vector<float> dotYs;
  float firstEndX = 1e9f;
};

namespace {

CollectiveBars drawCollectiveBars(const TimelineContext& ctx, int32_t i, bool sel,
                                  Selection* hover) {
  const LoadedRun* run = ctx.run;
  const auto& ix = run->collectives;
  const auto& c = ix.instances[static_cast<size_t>(i)];
  const bool bad = isBad(c);
  ImDrawList* dl = ctx.dl;
  CollectiveBars bars;
  for (size_t m : c.members) {
    const auto& r = ctx.model().collectives[m];
    const int row = r.rank >= 0 && r.rank < static_cast<int>(run->rowOfRank.size())
                        ? run->rowOfRank[static_cast<size_t>(r.rank)]
                        : -1;
    if (row < 0) continue;
    const float rowHt = ctx.heightOf(static_cast<size_t>(row));
    const float y0 = ctx.rowY[static_cast<size_t>(row)] + rowHt * 0.55f;
    const float y1 = ctx.rowY[static_cast<size_t>(row)] + rowHt - 2;
    const bool open = unfinished(r);
    const float x0 = ctx.xOf(static_cast<double>(r.startNs));
    const float x1 = std::max(x0 + 3, ctx.xOf(static_cast<double>(open ? ix.endOfRunNs : r.endNs)));
    bars.firstEndX = std::min(bars.firstEndX, x1);
    bars.top = std::min(bars.top, y0);
    bars.bottom = std::max(bars.bottom, y1);
    if (x1 < ctx.area0.x || x0 > ctx.area1.x) continue;
    const ImVec2 b0(x0, y0), b1(x1, y1);
    dl->AddRectFilled(b0, b1, open ? (theme::kBad & 0x00ffffffu) | (90u << 24) : theme::kCollective,
                      2);
    if (open) {  // hatching: not a completed collective
      dl->PushClipRect(b0, b1, true);
      for (float hx = x0 - (y1 - y0); hx < x1; hx += 7)
        dl->AddLine(ImVec2(hx, y1), ImVec2(hx + (y1 - y0), y0), theme::kBad, 1);
      dl->PopClipRect();
    }
    if (bad || sel)
      dl->AddRect(b0, b1, sel ? theme::kSelected : theme::kBad, 2, 0, sel ? 2.0f : 2.5f);
    if (ctx.probes->collectives.size() < 64)
      ctx.probes->collectives.push_back(
          {i, r.rank, ImVec4(x0, y0, x1, y1), open ? theme::kBad : theme::kCollective});
    const ImVec2 mouse = ctx.mouse;
    if (ctx.mouseInArea() && mouse.x >= x0 && mouse.x <= x1 && mouse.y >= y0 && mouse.y <= y1)
      *hover = {Selection::Kind::Collective, r.rank, i};
    bars.dotYs.push_back((y0 + y1) / 2);
  }
  return bars;
}

}  // namespace

Selection drawCollectives(const TimelineContext& ctx) {
  const auto& ix = ctx.run->collectives;
  Selection hover;
  if (ix.instances.empty()) return hover;
  ImDrawList* dl = ctx.dl;
  const auto visible = ix.visible(ctx.vStart, ctx.vEnd);
  // Too many to tie together legibly: bars only (zoom in for the bands).
  const bool dense = static_cast<float>(visible.size()) > (ctx.area1.x - ctx.area0.x) / 8;
  const int64_t selected =
      ctx.view->selection.kind == Selection::Kind::Collective ? ctx.view->selection.index : -1;
  float lastLabelRight = -1e9f;
  for (int32_t i : visible) {
    const auto& c = ix.instances[static_cast<size_t>(i)];
    const bool sel = i == selected;
    const CollectiveBars bars = drawCollectiveBars(ctx, i, sel, &hover);
    if (dense || bars.top > bars.bottom) continue;
    // The band: from the moment the last member joined until the first one finished.
    const float xj = ctx.xOf(static_cast<double>(c.lastStartNs));
    if (xj < ctx.area0.x - 200 || xj > ctx.area1.x) continue;
    const float xe = std::max(xj + 3, std::min(bars.firstEndX, xj + 400));
    const ImU32 lineCol = sel ? theme::kSelected : isBad(c) ? theme::kBad : theme::kCollective;
    if (c.members.size() > 1) {
      dl->AddRectFilled(ImVec2(xj, bars.top), ImVec2(xe, bars.bottom), theme::kCollectiveBand);
      dl->AddLine(ImVec2(xj, bars.top), ImVec2(xj, bars.bottom), lineCol, sel ? 3.0f : 2.0f);
      for (const float y : bars.dotYs) dl->AddCircleFilled(ImVec2(xj, y), 3.5f, lineCol);
      if (ctx.probes->collectiveBands.size() < 32)
        ctx.probes->collectiveBands.push_back(
            {i, ImVec2(xj, bars.top), ImVec2(xj, bars.bottom), lineCol});
    }
    const std::string label = title(c) + (c.complete() ? "" : "  (incomplete)");
    const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
    if (xj + 4 > lastLabelRight + 6 || sel) {
      const ImVec2 at(xj + 4, bars.top - ts.y - 1);
      dl->AddRectFilled(ImVec2(at.x - 2, at.y), ImVec2(at.x + ts.x + 2, at.y + ts.y),
                        theme::kLabelBackdrop, 2);
      dl->AddText(at, lineCol, label.c_str());
      lastLabelRight = at.x + ts.x;
    }
    // On the band (not on a bar): the collective, at the rank of what is under it (-1: keep
    // the rank of the hover beneath, Timeline::draw).
    if (ctx.mouseInArea() && std::fabs(ctx.mouse.x - xj) < 4 && ctx.mouse.y >= bars.top &&
        ctx.mouse.y <= bars.bottom)
      hover = {Selection::Kind::Collective, hover.rank, i};
  }
  return hover;
}

void collectiveTooltip(const TimelineContext& ctx, int64_t index) {
  const LoadedRun* run = ctx.run;
  if (!run || index < 0 || index >= static_cast<int64_t>(run->collectives.instances.size())) return;
  const auto& c = run->collectives.instances[static_cast<size_t>(index)];
  ImGui::BeginTooltip();
  ImGui::Text("%s", title(c).c_str());
  std::string members;
  for (int r : c.groupRanks) members += (members.empty() ? "r" : ", r") + std::to_string(r);
  ImGui::TextDisabled("group %s: %s   %zu/%d recorded   results %s", c.group.c_str(),
                      members.c_str(), c.members.size(), c.groupSize, toString(c.agreement));
  ImGui::EndTooltip();
}

void inspectCollective(PanelContext& panel, int64_t index) {
  const LoadedRun* run = panel.main.run.get();
  if (!run || index < 0 || index >= static_cast<int64_t>(run->collectives.instances.size())) return;
  const auto& c = run->collectives.instances[static_cast<size_t>(index)];
  const auto& model = run->model;
  const auto& first = model.collectives[c.members.front()];
  {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float w = ImGui::GetContentRegionAvail().x;
    dl->AddRectFilled(p, ImVec2(p.x + w, p.y + 24), theme::kHeaderBand, 2);
    dl->AddRectFilled(p, ImVec2(p.x + 4, p.y + 24), isBad(c) ? theme::kBad : theme::kCollective, 2);
    dl->AddText(ImVec2(p.x + 10, p.y + 4), theme::kText, ("Collective  " + title(c)).c_str());
    ImGui::Dummy(ImVec2(w, 26));
  }
  auto kv = [](const char* key, const std::string& value, ImU32 colour = theme::kText) {
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::TextDisabled("%s", key);
    ImGui::TableSetColumnIndex(1);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colour), "%s", value.c_str());
  };
  if (ImGui::BeginTable("##ckv", 2, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg)) {
    ImGui::TableSetupColumn("k", ImGuiTableColumnFlags_WidthFixed, 110);
    ImGui::TableSetupColumn("v", ImGuiTableColumnFlags_WidthStretch);
    std::string members;
    for (int r : c.groupRanks) members += (members.empty() ? "r" : ", r") + std::to_string(r);
    kv("op",
       c.op + (first.reduceOp.empty() ? "" : " (" + first.reduceOp + ")") +
           (c.opMismatch ? "  members called different ops" : ""),
       c.opMismatch ? theme::kBad : theme::kText);
    kv("group", c.group + "  (" + std::to_string(c.groupSize) + " ranks)");
    kv("members", members);
    kv("identity", "iteration " + std::to_string(c.iteration) + ", collective #" +
                       std::to_string(c.groupSeq) + " of the group");
    if (first.root >= 0) kv("root", "r" + std::to_string(first.root));
    kv("tensor", formatShape(first.shape) + " " + first.dtype + "  " + formatBytes(first.bytes));
    kv("recorded",
       std::to_string(c.members.size()) + " of " + std::to_string(c.groupSize) + " members");
    kv("results", toString(c.agreement),
       c.agreement == analysis::CollectiveAgreement::Agree    ? theme::kGood
       : c.agreement == analysis::CollectiveAgreement::Differ ? theme::kBad
                                                              : theme::kTextDim);
    const int64_t span = run->collectives.endOf(c) - c.firstStartNs;
    kv("span", formatDuration(static_cast<double>(span)) + " (first post to last completion)");
    ImGui::EndTable();
  }
  ImGui::Spacing();
  ImGui::TextDisabled("Per member (click to select its rank's collective)");
  if (ImGui::BeginTable(
          "##cmembers", 5,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerV)) {
    ImGui::TableSetupColumn("rank");
    ImGui::TableSetupColumn("state");
    ImGui::TableSetupColumn("wait");
    ImGui::TableSetupColumn("out checksum");
    ImGui::TableSetupColumn("in checksum");
    ImGui::TableHeadersRow();
    const uint64_t reference = first.outChecksum;
    const bool compared = analysis::collectiveResultsShared(c.op);
    for (size_t m : c.members) {
      const auto& r = model.collectives[m];
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      char label[32];
      std::snprintf(label, sizeof label, "r%d (g%d)", r.rank, r.groupRank);
      if (ImGui::Selectable(label, panel.view.selection.rank == r.rank,
                            ImGuiSelectableFlags_SpanAllColumns))
        panel.view.selection.rank = r.rank;
      ImGui::TableSetColumnIndex(1);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(unfinished(r) ? theme::kBad : theme::kText),
                         "%s", r.state.c_str());
      ImGui::TableSetColumnIndex(2);
      ImGui::TextUnformatted(
          r.endNs ? formatDuration(static_cast<double>(r.endNs - r.startNs)).c_str() : "-");
      ImGui::TableSetColumnIndex(3);
      if (theme::mono) ImGui::PushFont(theme::mono);
      const bool differs = compared && r.outChecksum != reference;
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(differs ? theme::kBad : theme::kText), "%s",
                         r.outChecksum ? hex64(r.outChecksum).c_str() : "-");
      ImGui::TableSetColumnIndex(4);
      ImGui::TextUnformatted(r.inChecksum ? hex64(r.inChecksum).c_str() : "-");
      if (theme::mono) ImGui::PopFont();
    }
    ImGui::EndTable();
  }
  if (!c.complete()) {
    std::string missing;
    for (int g : c.groupRanks) {
      bool found = false;
      for (size_t m : c.members) found = found || model.collectives[m].rank == g;
      if (!found) missing += (missing.empty() ? "r" : ", r") + std::to_string(g);
    }
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme::kBad), "never joined: %s",
                       missing.c_str());
  }
}

}  // namespace stagescope::ui
