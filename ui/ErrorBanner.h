// "Could not open the run": the banner over the timeline's place with why (a run that could
// not be opened or read whole) and a Dismiss button (ErrorBanner.cpp).
#pragma once

#include <string>

#include "imgui.h"

namespace stagescope::ui {

// Draws `error` at the top of `pos`, `size`; Dismiss clears it.
void drawErrorBanner(std::string& error, const ImVec2& pos, const ImVec2& size);

}  // namespace stagescope::ui
