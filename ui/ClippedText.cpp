#include "ui/ClippedText.h"

#include <algorithm>

#include "imgui.h"
#include "imgui_internal.h"

namespace stagescope::ui {
namespace {

constexpr float kSlackPx = 1.5f;  // sub-pixel layout rounding is not clipping

bool skipped(const char* name, const std::vector<std::string>& skip) {
  const std::string n = name ? name : "";
  return std::any_of(skip.begin(), skip.end(),
                     [&](const std::string& s) { return n.find(s) != std::string::npos; });
}

void clippedWindows(const ImGuiContext& g, const std::vector<std::string>& skip,
                    std::vector<ClippedText>& out) {
  for (const ImGuiWindow* w : g.Windows) {
    if (!w->WasActive || w->Hidden || w->SkipItems || w->ScrollbarX) continue;
    if (w->Flags & (ImGuiWindowFlags_HorizontalScrollbar | ImGuiWindowFlags_AlwaysAutoResize))
      continue;
    if (skipped(w->Name, skip)) continue;
    const float right = w->DC.CursorMaxPos.x, clip = w->InnerClipRect.Max.x;
    if (right > clip + kSlackPx) out.push_back({w->Name, right, clip, w->Pos.y});
  }
}

// A column's cells (headers excepted: TableHeader ends a cut label in "...") wider than the
// column.
void clippedColumns(ImGuiContext& g, const std::vector<std::string>& skip,
                    std::vector<ClippedText>& out) {
  for (int i = 0; i < g.Tables.GetMapSize(); ++i) {
    const ImGuiTable* t = g.Tables.TryGetMapData(i);
    if (!t || t->LastFrameActive != g.FrameCount || (t->Flags & ImGuiTableFlags_ScrollX)) continue;
    if (!t->OuterWindow || skipped(t->OuterWindow->Name, skip)) continue;
    for (int c = 0; c < t->ColumnsCount; ++c) {
      const ImGuiTableColumn& col = t->Columns[c];
      if (!col.IsEnabled || !col.IsVisibleX) continue;
      const float right = std::max(col.ContentMaxXFrozen, col.ContentMaxXUnfrozen);
      const float clip = col.ClipRect.Max.x;
      if (right > clip + kSlackPx)
        out.push_back({std::string(t->OuterWindow->Name) + "|table " + std::to_string(t->ID) +
                           " column " + std::to_string(c),
                       right, clip, t->OuterRect.Min.y});
    }
  }
}

}  // namespace

std::vector<ClippedText> findClippedText(const std::vector<std::string>& skip) {
  std::vector<ClippedText> out;
  ImGuiContext* g = ImGui::GetCurrentContext();
  if (!g) return out;
  clippedWindows(*g, skip, out);
  clippedColumns(*g, skip, out);
  return out;
}

}  // namespace stagescope::ui
