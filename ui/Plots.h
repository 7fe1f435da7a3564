// The Plots tab: loss per iteration and microbatch, gradient norm per parameter over
// iterations, and each rank's time split with the measured vs expected bubble (Plots.cpp).
#pragma once

#include <string>
#include <vector>

#include "ui/LoadedRun.h"
#include "ui/PanelContext.h"

namespace stagescope::ui {

class Plots {
 public:
  // Draws the three plots into the current window's remaining space (the details must be in:
  // otherwise it says why not).  The gradient plot's parameter is p.view.plotParam.
  void draw(PanelContext& p);
  // Forgets the run it drew last: a run opened since may reuse the old one's address.
  void forget() { drawnFor_ = nullptr; }

 private:
  const LoadedRun* drawnFor_ = nullptr;  // the run params_ lists
  std::vector<std::string> params_;      // the reduced parameters, in first-recorded order
};

}  // namespace stagescope::ui
