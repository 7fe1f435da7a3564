// The status banner under the menu bar: how the run ended, whether values went non-finite,
// and one-click buttons to the problems in causal order (StatusBanner.cpp).
#pragma once

#include "imgui.h"
#include "ui/PanelContext.h"

namespace stagescope::ui {

// Draws the banner over `pos`, `size` (screen coordinates) for the open run; nothing when
// none is open.  Records its rectangle, colour, sentence and buttons in p.probes.
void drawStatusBanner(PanelContext& p, const ImVec2& pos, const ImVec2& size);

}  // namespace stagescope::ui
