// The timeline's problems layer (StuckLayer.cpp): what unfinished ranks never completed, and
// the wait-for arrows between them.
#pragma once

#include "ui/TimelineContext.h"

namespace stagescope::ui {

// Row `row`'s stuck block, after its rank's last completed action; records the drawn block in
// stuckRect[rank].  Returns the stuck selection when the mouse is on it.
Selection drawStuck(const TimelineContext& ctx, size_t row, const RankReplayState& st,
                    StuckRects& stuckRect);
// The wait-for graph: an arrow from each stuck block to the rank it waits on.
void drawWaits(const TimelineContext& ctx, const StuckRects& stuckRect);
// The explanation of rank `rank`'s stuck block (how it ended, where, for how long, why).
void stuckTooltip(const TimelineContext& ctx, int rank);

}  // namespace stagescope::ui
