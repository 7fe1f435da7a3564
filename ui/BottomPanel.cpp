// The bottom panel's tab bar and its tabs (BottomPanel.h).
#include "ui/BottomPanel.h"

#include "ui/ComparePanel.h"
#include "ui/GridMap.h"
#include "ui/RunInfo.h"

namespace stagescope::ui {

void BottomPanel::draw(PanelContext& p, const ImVec2& pos, const ImVec2& size) {
  p.probes.bottom = ImVec4(pos.x, pos.y, pos.x + size.x, pos.y + size.y);
  ImGui::SetCursorScreenPos(pos);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(8, 4));
  ImGui::BeginChild("##bottom", size, false, ImGuiWindowFlags_AlwaysUseWindowPadding);
  ImGui::PopStyleVar();
  static const char* names[] = {"Grid map", "Plots", "Compare", "Find", "Run info"};
  if (ImGui::BeginTabBar("##tabs")) {
    for (int i = 0; i < static_cast<int>(BottomTab::Count); ++i) {
      ImGuiTabItemFlags f = (p.view.tabRequested && static_cast<int>(p.view.tab) == i)
                                ? ImGuiTabItemFlags_SetSelected
                                : 0;
      if (ImGui::BeginTabItem(names[i], nullptr, f)) {
        if (!p.view.tabRequested) p.view.tab = static_cast<BottomTab>(i);
        // The grid map of a wide layout scrolls sideways too; the other tabs wrap their text.
        ImGui::BeginChild(
            "##tabbody", ImVec2(0, 0), false,
            i == static_cast<int>(BottomTab::GridMap) ? ImGuiWindowFlags_HorizontalScrollbar : 0);
        switch (static_cast<BottomTab>(i)) {
          case BottomTab::GridMap:
            drawGridMap(p);
            break;
          case BottomTab::Plots:
            plots_.draw(p);
            break;
          case BottomTab::Compare:
            drawCompare(p);
            break;
          case BottomTab::Find:
            find_.draw(p);
            break;
          case BottomTab::RunInfo:
            drawRunInfo(p);
            break;
          default:
            break;
        }
        ImGui::EndChild();
        ImGui::EndTabItem();
      }
    }
    p.view.tabRequested = false;
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
}

}  // namespace stagescope::ui
