// The Open run dialog (OpenDialog.h).
#include "ui/OpenDialog.h"

#include <cstdio>

namespace stagescope::ui {

void OpenDialog::draw(PanelContext& p) {
  if (show_) {
    ImGui::OpenPopup("Open run");
    show_ = false;
  }
  ImGui::SetNextWindowSize(ImVec2(560, 0), ImGuiCond_Appearing);
  if (ImGui::BeginPopupModal("Open run", nullptr, ImGuiWindowFlags_NoSavedSettings)) {
    ImGui::TextUnformatted(compare_ ? "Run file to compare with the open run:" : "Run file (.db)");
    if (ImGui::IsWindowAppearing()) ImGui::SetKeyboardFocusHere();
    char buf[1024];
    std::snprintf(buf, sizeof buf, "%s", p.view.openPath.c_str());
    bool enter = ImGui::InputText("##path", buf, sizeof buf, ImGuiInputTextFlags_EnterReturnsTrue);
    p.view.openPath = buf;
    if (!p.view.recent.empty()) {
      ImGui::TextDisabled("Recent");
      for (const auto& r : p.view.recent)
        if (ImGui::Selectable(r.c_str())) p.view.openPath = r;
    }
    if (ImGui::Button("Open") || enter) {
      if (compare_)
        p.opener.openCompare(p.view.openPath);
      else
        p.opener.open(p.view.openPath);
      ImGui::CloseCurrentPopup();
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape)))
      ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
}

}  // namespace stagescope::ui
