// A captured job's plan overlay on the timeline (CapturedPlanLayer.cpp).
#pragma once

#include "ui/TimelineContext.h"

namespace stagescope::ui {

// The plan's actions over the operations that carried them, deviations in red (records
// FrameProbes::planSpans).
void drawCapturedPlan(const TimelineContext& ctx);

}  // namespace stagescope::ui
