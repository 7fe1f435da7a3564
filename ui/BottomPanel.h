// The panel under the timeline: a tab bar over the grid map, plots, compare, find and run
// info (the tab shown is p.view.tab; a script or a button asks for one with tabRequested).
// It owns the tabs that keep state of their own.
#pragma once

#include "imgui.h"
#include "ui/FindPanel.h"
#include "ui/PanelContext.h"
#include "ui/Plots.h"

namespace stagescope::ui {

class BottomPanel {
 public:
  // Draws the tabs over `pos`, `size` (screen coordinates); records its rectangle.
  void draw(PanelContext& p, const ImVec2& pos, const ImVec2& size);
  // Forgets what the tabs cached for the previous run.
  void forget() { plots_.forget(); }
  // Find's first field takes the keyboard at its next draw.
  void focusFind() { find_.focus(); }

 private:
  Plots plots_;
  FindPanel find_;
};

}  // namespace stagescope::ui
