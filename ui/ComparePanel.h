// The Compare tab: the open run (A) against a second run (B), as analysis::compareRuns
// judges them; with no run B yet, where to open one (ComparePanel.cpp).
#pragma once

#include "ui/PanelContext.h"

namespace stagescope::ui {

void drawCompare(PanelContext& panel);

}  // namespace stagescope::ui
