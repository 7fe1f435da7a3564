// The timeline's transfers layer (TransfersLayer.cpp): an arrow per transfer, local hand-offs
// as loops.
#pragma once

#include "ui/TimelineContext.h"

namespace stagescope::ui {

// Draws the arrows in view; returns the transfer the mouse is nearest to (within a few px).
Selection drawArrows(const TimelineContext& ctx);

}  // namespace stagescope::ui
