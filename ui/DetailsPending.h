// What a panel that needs the run's details (plan, gradients, losses, verdicts) shows while
// they load, or when they could not be read: the note instead of its content.
#pragma once

#include <string>

#include "ui/PanelContext.h"
#include "ui/RunSlot.h"

namespace stagescope::ui {

// "" once the details are in (or no run is open); else what a panel that needs them says.
std::string detailsNote(const RunSlot& main);
// Draws detailsNote() in the panel `panel` ("plots", "find", ...: named in
// FrameProbes::detailsPendingPanels); true when it did (the panel draws nothing else).
bool drawDetailsPending(PanelContext& p, const char* panel);

}  // namespace stagescope::ui
