// The note of a panel whose details are not in (DetailsPending.h).
#include "ui/DetailsPending.h"

#include "imgui.h"

namespace stagescope::ui {

std::string detailsNote(const RunSlot& main) {
  const LoadedRun* r = main.run.get();
  if (!r || r->detailsLoaded) return "";
  if (main.detailsPending()) return "loading details... (plan, gradients, losses)";
  return "details not loaded: " + (main.error.empty() ? std::string("(stopped)") : main.error);
}

bool drawDetailsPending(PanelContext& p, const char* panel) {
  const std::string note = detailsNote(p.main);
  if (note.empty()) return false;
  p.probes.detailsPendingPanels.push_back(panel);
  ImGui::TextDisabled("%s", note.c_str());
  if (p.main.detailsPending()) ImGui::ProgressBar(p.main.progress(), ImVec2(300, 0));
  return true;
}

}  // namespace stagescope::ui
