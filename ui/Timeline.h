// The timeline panel: one row per rank with its actions, the transfer arrows, the plan
// overlay, the problems and the replay state, drawn by one painter per layer
// (TimelineContext.h lists them) over a layout computed once per frame.  It owns what its
// layers keep between frames: the actions layer's caches and the range being selected.
#pragma once

#include "imgui.h"
#include "ui/ActionsLayer.h"
#include "ui/CursorLayer.h"
#include "ui/PanelContext.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {

class Timeline {
 public:
  // Draws the open run's timeline (p.run() must be set) over `pos`, `size` into `dl`, handles
  // its input (wheel zoom, drag pan, right-drag range, click select) and its tooltip.
  void draw(PanelContext& p, ImDrawList* dl, const ImVec2& pos, const ImVec2& size);
  // Forgets what it cached for the previous run (a run opened since may reuse its address).
  void forget() { actions_.forget(); }

 private:
  // The frame's layout: the rows' area, the scale, each row's position (clamps the scroll).
  TimelineContext layout(PanelContext& p, ImDrawList* dl, const ImVec2& pos, const ImVec2& size);
  // Zoom, pan and the range drag; true when the rows were clicked.
  bool input(PanelContext& p, TimelineContext& ctx);
  // The layers over the rows; returns the hover picked among the painters' candidates.
  TimelineHover drawLayers(const TimelineContext& ctx);

  ActionsLayer actions_;
  TimeRangeDrag range_;  // right drag on the rows
};

}  // namespace stagescope::ui
