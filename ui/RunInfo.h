// The Run info tab: the run's identity, status, versions, notes and diagnoses, and its
// recorded config (RunInfo.cpp).
#pragma once

#include "ui/PanelContext.h"

namespace stagescope::ui {

void drawRunInfo(PanelContext& p);

}  // namespace stagescope::ui
