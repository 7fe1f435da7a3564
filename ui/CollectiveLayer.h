// Collectives of captured runs: their timeline layer and their inspector section
// (CollectiveLayer.cpp).
#pragma once

#include <cstdint>

#include "ui/PanelContext.h"

namespace stagescope::ui {

// The inspector's section for collective instance `index` (LoadedRun::collectives): its
// group, members, tensor, whether the members' results agree, and each member's checksums.
void inspectCollective(PanelContext& panel, int64_t index);

}  // namespace stagescope::ui
