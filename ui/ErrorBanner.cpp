// The error banner (ErrorBanner.h).
#include "ui/ErrorBanner.h"

#include "ui/Theme.h"

namespace stagescope::ui {

void drawErrorBanner(std::string& error, const ImVec2& pos, const ImVec2& size) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 p0(pos.x + 24, pos.y + 24);
  ImVec2 p1(pos.x + size.x - 24, pos.y + 24 + 86);
  dl->AddRectFilled(p0, p1, theme::kErrorBanner, 3);
  dl->AddRectFilled(p0, ImVec2(p0.x + 5, p1.y), theme::kBad, 3);
  dl->AddText(ImVec2(p0.x + 16, p0.y + 10), theme::kErrorTitle, "Could not open the run");
  dl->AddText(nullptr, 0, ImVec2(p0.x + 16, p0.y + 34), theme::kText, error.c_str(), nullptr,
              p1.x - p0.x - 32);
  ImGui::SetCursorScreenPos(ImVec2(p1.x - 80, p0.y + 8));
  if (ImGui::SmallButton("Dismiss")) error.clear();
}

}  // namespace stagescope::ui
