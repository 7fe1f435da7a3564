// The grid map tab: each module's TP x PP x DP layout at its rank offset, bridges between
// modules, and every rank's state at the replay step (GridMap.cpp).
#pragma once

#include "ui/PanelContext.h"

namespace stagescope::ui {

// Draws the map into the current window (scrolls when larger); a click on a cell selects its
// rank's current action.  Records the cells of unfinished ranks and the content's extent.
void drawGridMap(PanelContext& panel);

}  // namespace stagescope::ui
