// The status bar (StatusBar.h).
#include "ui/StatusBar.h"

#include "ui/DetailsPending.h"
#include "ui/Theme.h"

namespace stagescope::ui {

void drawStatusBar(PanelContext& p, const ImVec2& pos, const ImVec2& size) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(pos, ImVec2(pos.x + size.x, pos.y + size.y), theme::kStatusBar);
  ImGui::SetCursorScreenPos(ImVec2(pos.x + 8, pos.y + 3));
  const LoadedRun* r = p.main.run.get();
  if (p.main.loading() && !p.main.detailsPending()) {
    ImGui::Text("Loading %s", p.main.path.c_str());
    ImGui::SameLine();
    ImGui::ProgressBar(p.main.progress(), ImVec2(240, 16));
  } else if (r && !r->detailsLoaded) {
    size_t events = r->model.transfers.size();
    for (const auto& a : r->model.actions) events += a.size();
    ImGui::Text("%zu actions and transfers   %zu ranks   timeline in %.2f s (+%.2f s index)   %s",
                events, static_cast<size_t>(r->model.rankCount()), r->loadSeconds, r->indexSeconds,
                detailsNote(p.main).c_str());
    if (p.main.detailsPending()) {
      ImGui::SameLine();
      ImGui::ProgressBar(p.main.progress(), ImVec2(200, 16));
    }
  } else if (r) {
    size_t events = r->model.transfers.size() + r->model.gradients.size() + r->model.losses.size();
    for (const auto& a : r->model.actions) events += a.size();
    ImGui::Text("%zu events   %zu ranks   timeline in %.2f s (+%.2f s index), details %.2f s   %s",
                events, static_cast<size_t>(r->model.rankCount()), r->loadSeconds, r->indexSeconds,
                r->detailsSeconds, r->model.partial ? "PARTIAL RUN" : "");
    if (r->replay.brokenConstraints())
      ImGui::SameLine(),
          ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%zu causal constraints could not be met",
                             r->replay.brokenConstraints());
  } else {
    ImGui::TextDisabled("No run open. File > Open, or drop a run file on the window.");
  }
  if (p.other.loading()) {
    ImGui::SameLine();
    ImGui::Text("   compare: loading");
    ImGui::SameLine();
    ImGui::ProgressBar(p.other.progress(), ImVec2(160, 16));
  } else if (p.other.run) {
    ImGui::SameLine();
    ImGui::TextDisabled("   compare: %s", p.other.path.c_str());
  }
}

}  // namespace stagescope::ui
