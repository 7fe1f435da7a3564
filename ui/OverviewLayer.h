// The run file's overview drawn in the timeline's place while the run loads (OverviewLayer.cpp).
#pragma once

#include "imgui.h"
#include "storage/Overview.h"
#include "ui/FrameProbes.h"

namespace stagescope::ui {

// Draws overview `o` over `pos`, `size` with the load's `progress` (0..1); records its rows
// and iteration lines in `probes`.  False when the overview has nothing to draw.
bool drawOverview(ImDrawList* dl, const storage::RunOverview& o, float progress, const ImVec2& pos,
                  const ImVec2& size, FrameProbes& probes);

}  // namespace stagescope::ui
