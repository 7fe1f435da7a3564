// The timeline's rows layer (RowsLayer.cpp): row backgrounds, module headers, the labels
// column.
#pragma once

#include "ui/TimelineContext.h"

namespace stagescope::ui {

void drawRowBackgrounds(const TimelineContext& ctx);
// The labels column: each rank's label, its fate badge, the running dot (records
// FrameProbes::rowLabels).
void drawRowLabels(const TimelineContext& ctx);

}  // namespace stagescope::ui
