// Compare: a second run aligned to the first by logical identity (CompareAlign).
#include <cstdio>

#include "ui/App.h"

namespace stagescope::ui {

void App::drawCompare() {
  if (!main_.run) {
    ImGui::TextDisabled("Open a run first.");
    return;
  }
  if (other_.loading()) {
    ImGui::Text("Loading %s", other_.path.c_str());
    ImGui::ProgressBar(other_.progress(), ImVec2(300, 0));
    return;
  }
  const Alignment* al = other_.alignment.get();
  if (!other_.run || !al) {
    ImGui::TextUnformatted(
        "Compare this run with a second run (any layout of the same model and seed).");
    char buf[1024];
    std::snprintf(buf, sizeof buf, "%s", openPathBuffer_.c_str());
    ImGui::SetNextItemWidth(420);
    bool enter = ImGui::InputTextWithHint("##cmp", "path to a run file (.db)", buf, sizeof buf,
                                          ImGuiInputTextFlags_EnterReturnsTrue);
    openPathBuffer_ = buf;
    ImGui::SameLine();
    if (ImGui::Button("Open for compare") || enter) openCompare(openPathBuffer_);
    for (const auto& r : view_.recent) {
      if (r == main_.path) continue;
      if (ImGui::SmallButton(r.c_str())) openCompare(r);
      ImGui::SameLine();
    }
    ImGui::NewLine();
    if (!other_.error.empty())
      ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s", other_.error.c_str());
    return;
  }
  ImGui::Text("A: %s", main_.path.c_str());
  ImGui::SameLine(0, 30);
  ImGui::Text("B: %s", other_.path.c_str());
  ImGui::SameLine(0, 30);
  ImGui::TextColored(ImVec4(0.5f, 0.85f, 0.55f, 1), "%zu same", al->same);
  ImGui::SameLine();
  ImGui::TextColored(al->differ ? ImVec4(1, 0.4f, 0.4f, 1) : ImVec4(0.6f, 0.6f, 0.6f, 1),
                     "%zu differ", al->differ);
  ImGui::SameLine();
  ImGui::TextDisabled("%zu only in A, %zu only in B", al->onlyA, al->onlyB);
  ImGui::BeginDisabled(al->firstDivergence < 0);
  if (ImGui::Button("Jump to first divergence")) {
    std::string err;
    runCommand("jump-divergence", &err);
  }
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::Checkbox("differences only", &view_.compareDifferencesOnly);
  if (al->firstDivergence >= 0) {
    ImGui::SameLine(0, 20);
    ImGui::TextColored(ImVec4(1, 0.6f, 0.3f, 1), "first divergence: %s",
                       al->items[al->firstDivergence].key.c_str());
  }
  std::vector<int64_t> shown;
  for (size_t i = 0; i < al->items.size(); ++i)
    if (!view_.compareDifferencesOnly || al->items[i].state != AlignState::Same)
      shown.push_back(static_cast<int64_t>(i));
  if (ImGui::BeginTable("##cmptable", 6,
                        ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                            ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_Resizable)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("state", ImGuiTableColumnFlags_WidthFixed, 80);
    ImGui::TableSetupColumn("kind", ImGuiTableColumnFlags_WidthFixed, 70);
    ImGui::TableSetupColumn("logical identity", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("A", ImGuiTableColumnFlags_WidthFixed, 170);
    ImGui::TableSetupColumn("B", ImGuiTableColumnFlags_WidthFixed, 170);
    ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, 40);
    ImGui::TableHeadersRow();
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(shown.size()));
    while (clip.Step()) {
      for (int r = clip.DisplayStart; r < clip.DisplayEnd; ++r) {
        const AlignedItem& it = al->items[shown[r]];
        ImGui::TableNextRow();
        ImGui::TableSetColumnIndex(0);
        ImVec4 c = it.state == AlignState::Same     ? ImVec4(0.5f, 0.85f, 0.55f, 1)
                   : it.state == AlignState::Differ ? ImVec4(1, 0.4f, 0.4f, 1)
                                                    : ImVec4(0.8f, 0.7f, 0.4f, 1);
        char sel[48];
        std::snprintf(sel, sizeof sel, "%s##c%lld", toString(it.state),
                      static_cast<long long>(shown[r]));
        ImGui::PushStyleColor(ImGuiCol_Text, c);
        if (ImGui::Selectable(sel, view_.compareSelected == shown[r],
                              ImGuiSelectableFlags_SpanAllColumns)) {
          view_.compareSelected = shown[r];
          if (it.a >= 0) {
            if (it.kind == AlignKind::Transfer)
              select({Selection::Kind::Transfer, -1, it.a}, true);
            else if (it.kind == AlignKind::Gradient)
              select({Selection::Kind::Gradient, -1, it.a}, false);
            else
              select({Selection::Kind::Loss, -1, it.a}, false);
          }
        }
        ImGui::PopStyleColor();
        ImGui::TableSetColumnIndex(1);
        ImGui::TextUnformatted(toString(it.kind));
        ImGui::TableSetColumnIndex(2);
        ImGui::TextUnformatted(it.key.c_str());
        if (theme::mono) ImGui::PushFont(theme::mono);
        for (int side = 0; side < 2; ++side) {
          ImGui::TableSetColumnIndex(3 + side);
          int64_t idx = side ? it.b : it.a;
          if (idx < 0)
            ImGui::TextDisabled("-");
          else if (it.kind == AlignKind::Transfer)
            ImGui::Text("%s", hex64(side ? it.checksumB : it.checksumA).c_str());
          else
            ImGui::Text("%.9g", side ? it.valueB : it.valueA);
        }
        if (theme::mono) ImGui::PopFont();
      }
    }
    ImGui::EndTable();
  }
}

}  // namespace stagescope::ui
