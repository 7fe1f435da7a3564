// The replay bar: step controls, play/pause with speed, scrub bar with iteration marks, and
// a one-line description of the current step.
#include "ui/ReplayPanel.h"

#include <cstdio>

#include "ui/Formatting.h"
#include "ui/Theme.h"

namespace stagescope::ui {

void drawReplayBar(PanelContext& panel, const ImVec2& pos, const ImVec2& size) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(pos, ImVec2(pos.x + size.x, pos.y + size.y), theme::kBarBackground);
  dl->AddLine(ImVec2(pos.x, pos.y + size.y - 1), ImVec2(pos.x + size.x, pos.y + size.y - 1),
              theme::kGrid);
  const LoadedRun* run = panel.main.run.get();
  ImGui::SetCursorScreenPos(ImVec2(pos.x + 8, pos.y + 7));
  ImGui::BeginDisabled(run == nullptr);
  const auto* replay = run ? &run->replay : nullptr;
  const int64_t total = replay ? static_cast<int64_t>(replay->size()) : 0;
  auto button = [&](const char* label, const char* tip) {
    bool r = ImGui::Button(label);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tip);
    ImGui::SameLine(0, 3);
    return r;
  };
  if (button("|<", "First step (Home)")) panel.nav.stepTo(0);
  if (button("<<", "Previous iteration (Ctrl+Left)") && replay)
    panel.nav.stepTo(replay->prevIteration(panel.view.step));
  if (button("<m", "Previous microbatch (Shift+Left)") && replay)
    panel.nav.stepTo(replay->prevMicrobatch(panel.view.step));
  if (button("<", "Step back (Left)")) panel.nav.stepTo(panel.view.step - 1);
  ImGui::PushStyleColor(ImGuiCol_Button, panel.view.playing ? ImVec4(0.55f, 0.42f, 0.1f, 1)
                                                            : ImVec4(0.2f, 0.38f, 0.25f, 1));
  if (button(panel.view.playing ? " Pause " : " Play  ", "Play / pause (Space)")) {
    if (!panel.view.playing && panel.view.step >= total) panel.nav.stepTo(0);
    panel.view.playing = !panel.view.playing;
  }
  ImGui::PopStyleColor();
  if (button(">", "Step forward (Right)")) panel.nav.stepTo(panel.view.step + 1);
  if (button("m>", "Next microbatch (Shift+Right)") && replay)
    panel.nav.stepTo(replay->nextMicrobatch(panel.view.step));
  if (button(">>", "Next iteration (Ctrl+Right)") && replay)
    panel.nav.stepTo(replay->nextIteration(panel.view.step));
  if (button(">|", "Last step (End)")) panel.nav.stepTo(total);
  ImGui::SameLine(0, 10);
  ImGui::SetNextItemWidth(110);
  ImGui::SliderFloat("##speed", &panel.view.speed, 1, 2000, "%.0f steps/s",
                     ImGuiSliderFlags_Logarithmic);
  ImGui::SameLine(0, 10);

  // Description of the current step.
  char desc[200] = "";
  if (run && panel.view.step > 0) {
    const ReplayStep& s = replay->steps()[panel.view.step - 1];
    const auto& a = run->model.actions[s.rank][s.action];
    std::snprintf(desc, sizeof desc, "step %lld/%lld  r%d %s %s it%d%s",
                  static_cast<long long>(panel.view.step), static_cast<long long>(total), s.rank,
                  s.end ? "ends" : "begins", events::toString(a.kind), a.iteration,
                  microbatchSuffix(a.microbatch).c_str());
  } else if (run) {
    std::snprintf(desc, sizeof desc, "step 0/%lld  (before the run)",
                  static_cast<long long>(total));
  }
  const float descW = 330;
  // Scrub bar.
  ImVec2 sp = ImGui::GetCursorScreenPos();
  const float scrubW = pos.x + size.x - sp.x - descW - 12;
  if (scrubW > 40) {
    ImGui::InvisibleButton("##scrub", ImVec2(scrubW, 22));
    ImVec2 b0 = ImGui::GetItemRectMin(), b1 = ImGui::GetItemRectMax();
    dl->AddRectFilled(b0, b1, theme::kHeaderBand, 3);
    if (total > 0) {
      if (ImGui::IsItemActive()) {
        float f = std::clamp((ImGui::GetIO().MousePos.x - b0.x) / (b1.x - b0.x), 0.0f, 1.0f);
        panel.nav.stepTo(static_cast<int64_t>(f * static_cast<float>(total) + 0.5f));
      }
      float fx =
          b0.x + (b1.x - b0.x) * static_cast<float>(panel.view.step) / static_cast<float>(total);
      dl->AddRectFilled(b0, ImVec2(fx, b1.y), theme::kReplayProgress, 3);
      for (int64_t s = replay->nextIteration(0); s < total; s = replay->nextIteration(s)) {
        float x = b0.x + (b1.x - b0.x) * static_cast<float>(s) / static_cast<float>(total);
        dl->AddLine(ImVec2(x, b0.y), ImVec2(x, b1.y), theme::kReplayTick);
      }
      dl->AddRectFilled(ImVec2(fx - 2, b0.y - 1), ImVec2(fx + 2, b1.y + 1), theme::kAccent);
      if (ImGui::IsItemHovered()) {
        float f = std::clamp((ImGui::GetIO().MousePos.x - b0.x) / (b1.x - b0.x), 0.0f, 1.0f);
        ImGui::SetTooltip("step %lld", static_cast<long long>(f * static_cast<float>(total)));
      }
    }
    ImGui::SameLine(0, 10);
  }
  ImGui::EndDisabled();
  ImVec2 dp = ImGui::GetCursorScreenPos();
  if (theme::mono) ImGui::PushFont(theme::mono);
  dl->AddText(ImVec2(dp.x, pos.y + 11), theme::kText, desc);
  if (theme::mono) ImGui::PopFont();
}

}  // namespace stagescope::ui
