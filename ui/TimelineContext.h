// What every layer of the timeline needs to draw one frame, computed once per frame by
// Timeline::draw and handed to one painter per layer (the way Tracy takes its timeline
// apart): where the panel and its rows' area are, the view's time range and scale, each row's
// y position and height, the run, the view, the mouse, and where to record what was drawn.
// A painter draws its layer and returns what the mouse is on in it (its hover candidate);
// Timeline::draw picks the hover among them.  Painters are free functions (one header per
// layer) but for the actions layer, an object that keeps its caches (ActionsLayer.h).
//
//   RowsLayer.cpp            row backgrounds, module headers, the labels column
//   IterationLinesLayer.cpp  full-height lines at iterations' starts
//   ActionsLayer.cpp         a row's actions (folded when dense), plan marks, replay cursor
//   StuckLayer.cpp           what unfinished ranks never completed, the wait-for arrows
//   TransfersLayer.cpp       the transfer arrows (local hand-offs as loops)
//   CollectiveLayer.cpp      captured collectives
//   CapturedPlanLayer.cpp    a captured job's plan overlay
//   CursorLayer.cpp          the replay step's line, the range being selected
//   TooltipLayer.cpp         the hovered thing's tooltip
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "imgui.h"
#include "ui/FrameProbes.h"
#include "ui/LoadedRun.h"
#include "ui/ViewerState.h"

namespace stagescope::ui {

constexpr float kTimelineLabelWidth = 200;
constexpr float kTimelineRulerHeight = 38;  // time labels above, iteration labels below
constexpr float kTimelineHeaderHeight = 18;

struct TimelineContext {
  ImDrawList* dl = nullptr;
  const LoadedRun* run = nullptr;
  const ViewerState* view = nullptr;  // the selection, the toggles (arrows, plan, idle gaps)
  FrameProbes* probes = nullptr;      // where a painter records what it drew, for the tests
  ImVec2 pos, size;                   // the panel
  ImVec2 area0, area1;                // the rows' area: right of the labels, below the ruler
  float areaW = 10;                   // area1.x - area0.x, at least 10
  double viewStart = 0, viewEnd = 1, nsPerPx = 1;
  int64_t vStart = 0, vEnd = 1;  // the view's range in whole ns (for the time indexes)
  float rowH = 24;               // one lane's height (a colocated rank's row has several)
  std::vector<float> rowY;       // each row's top, scrolled
  ImVec2 mouse;
  double mouseT = 0;     // the time under the mouse (at the scale before this frame's input)
  bool hovered = false;  // the mouse is on the timeline's rows (the input button)
  int64_t step = 0;      // the replay step

  const model::RunModel& model() const { return run->model; }
  float xOf(double t) const { return static_cast<float>(area0.x + (t - viewStart) / nsPerPx); }
  float heightOf(size_t row) const { return rowH * static_cast<float>(run->rows[row].laneCount()); }
  // Whether any of row `row` is between the area's top and bottom.
  bool rowVisible(size_t row) const {
    return !(rowY[row] > area1.y || rowY[row] + heightOf(row) < area0.y);
  }
  // Whether the mouse is on row `row` (right of the labels).
  bool rowHovered(size_t row) const {
    return hovered && mouse.y >= rowY[row] && mouse.y < rowY[row] + heightOf(row) &&
           mouse.x >= area0.x;
  }
  bool mouseInArea() const {
    return mouse.x >= area0.x && mouse.x < area1.x && mouse.y >= area0.y && mouse.y < area1.y;
  }
};

// What the mouse is on: the selection a click makes and, on a folded run of actions, how
// many it holds and their time span (a click zooms to it instead); the rank whose stuck block
// it is on (its explanation heads the tooltip) or -1.
struct TimelineHover {
  Selection what;
  size_t folded = 0;
  int64_t foldStart = 0, foldEnd = 0;
  int stuckRank = -1;
};

// A transfer's arrow as drawn (TransfersLayer.cpp): its ends, colour and thickness.
struct TimelineArrow {
  ImVec2 a, b;
  ImU32 col;
  float thick;
  bool inFlight, selected;
};

// "F", "B", "DP", "OPT", else the kind's name (ActionsLayer.cpp).
const char* shortActionName(events::ActionKind k);
// A filled arrow head at `to`, pointing away from `from` (TransfersLayer.cpp).
void arrowHead(ImDrawList* dl, ImVec2 from, ImVec2 to, ImU32 col, float size);

// A rank's stuck block as drawn (x0, y0, x1, y1; x1 < x0 when none), for the wait-for arrows.
using StuckRects = std::vector<ImVec4>;

}  // namespace stagescope::ui
