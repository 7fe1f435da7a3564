// The timeline's cursors (CursorLayer.cpp): the replay step's moment, the range being selected.
#pragma once

#include "ui/TimelineContext.h"

namespace stagescope::ui {

// A time range being selected with a right drag: from startNs to the mouse.
struct TimeRangeDrag {
  bool active = false;
  double startNs = 0;  // on the run's clock
};

void drawTimeCursors(const TimelineContext& ctx, const TimeRangeDrag& range);

}  // namespace stagescope::ui
