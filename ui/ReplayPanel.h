// The replay bar under the status banner: step controls, play/pause with speed, a scrub bar
// with iteration marks, and what the current step is (ReplayPanel.cpp).
#pragma once

#include "imgui.h"
#include "ui/PanelContext.h"

namespace stagescope::ui {

// Draws the bar over `pos`, `size` (screen coordinates); disabled while no run is open.
void drawReplayBar(PanelContext& panel, const ImVec2& pos, const ImVec2& size);

}  // namespace stagescope::ui
