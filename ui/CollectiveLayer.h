// Collectives of captured runs: their timeline layer and their inspector section
// (CollectiveLayer.cpp).
#pragma once

#include <cstdint>

#include "ui/PanelContext.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {

// Bars per member, bands across the group.  On a band (not a bar) the returned hover's rank
// is -1: the rank under it is kept.
Selection drawCollectives(const TimelineContext& ctx);
// The tooltip of collective instance `index`.
void collectiveTooltip(const TimelineContext& ctx, int64_t index);
// The inspector's section for collective instance `index` (LoadedRun::collectives): its
// group, members, tensor, whether the members' results agree, and each member's checksums.
void inspectCollective(PanelContext& panel, int64_t index);

}  // namespace stagescope::ui
