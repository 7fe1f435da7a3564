// The timeline's tooltip (TooltipLayer.cpp).
#pragma once

#include "ui/TimelineContext.h"

namespace stagescope::ui {

// The tooltip of what the mouse is on (a stuck block's explanation first).
void drawTimelineTooltip(const TimelineContext& ctx, const TimelineHover& hover);

}  // namespace stagescope::ui
