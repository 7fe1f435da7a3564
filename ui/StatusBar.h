// The status bar at the window's bottom: the main run's load progress or its size and load
// times, the compare run's (StatusBar.cpp).
#pragma once

#include "imgui.h"
#include "ui/PanelContext.h"

namespace stagescope::ui {

void drawStatusBar(PanelContext& p, const ImVec2& pos, const ImVec2& size);

}  // namespace stagescope::ui
