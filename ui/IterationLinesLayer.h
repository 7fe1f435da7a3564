// The timeline's iteration lines layer (IterationLinesLayer.cpp).
#pragma once

#include "ui/TimelineContext.h"

namespace stagescope::ui {

// Full-height lines at the iterations' starts, while they are far enough apart
// (ui/IterationLines.h); counts them in FrameProbes::timelineIterationLines.
void drawIterationLines(const TimelineContext& ctx);

}  // namespace stagescope::ui
