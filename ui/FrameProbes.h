// What the last frame drew and where, for the GUI test's pixel checks (written beside each
// screenshot as PATH.probes) and the headless App tests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "imgui.h"
#include "ui/ClippedText.h"

namespace stagescope::ui {

// Rectangles of what the last frame drew, for the GUI test's pixel checks.
struct FrameProbes {
  ImVec4 timeline, inspector, gridMap, bottom, banner;  // x0, y0, x1, y1
  ImU32 bannerColour = 0;                               // the status badge's fill
  std::string bannerText;                               // the banner's sentence
  std::string bannerShown;  // what of it fits beside the buttons (ends in "..." when cut)
  std::vector<std::string> bannerButtons;  // its problem buttons, left to right
  // Panels that said "loading details…" (or why the details are missing) instead of drawing
  // what needs them: "plots", "find", "inspector", "compare".
  std::vector<std::string> detailsPendingPanels;
  struct Item {
    int rank;
    int64_t action;
    ImVec4 rect;
    ImU32 colour;
  };
  std::vector<Item> items;  // a few single (unfolded) forward/backward blocks
  struct Marked {
    int rank;
    ImVec4 rect;
    ImU32 colour;
  };
  std::vector<int> stuckBreaks;  // ranks whose stuck action is drawn cut, with a break
  std::vector<Marked> stuck;     // the stuck (never completed) action drawn after a rank's last
  // A captured job's plan overlay: each planned action's bracket (green: as planned; red:
  // where the rank deviated or stopped).
  std::vector<Marked> planSpans;
  std::vector<Marked> cells;           // grid-map cells of ranks that did not complete
  std::vector<std::string> gridHeads;  // every grid-map cell's label ("r3  t1 p0 d1", "r?  ...")
  struct Wait {
    int rank, waitsOn;
    ImVec2 from, to;
    bool inCycle;
  };
  std::vector<Wait> waits;  // wait-for arrows drawn on the timeline
  // Colocated ranks: forward/backward blocks drawn in a lane of a split row (the lane's
  // module and colour), grid cells that show a rank shared with another module, and the loop
  // arrows of local hand-offs (from the send to the receive, in the arrow's colour).
  struct LaneItem {
    int rank, lane, moduleIndex;
    ImVec4 rect;
    ImU32 colour;
  };
  std::vector<LaneItem> laneItems;
  std::vector<Marked> sharedCells;
  struct Local {
    int rank;
    ImVec2 from, to;
    ImU32 colour;
  };
  std::vector<Local> locals;
  // Timeline rows drawn zoomed out as a busy share per pixel column (drawBusyRow): the rank
  // and the shaded rectangle (x0, y0, x1, y1).
  struct BusyRow {
    int rank;
    ImVec4 rect;
  };
  std::vector<BusyRow> busyRows;
  // A rank row's label: where its text ends and where the fate badge beside it begins (the
  // label column's right edge when the rank has no badge).
  struct RowLabel {
    int rank;
    float textRight, badgeLeft;
  };
  std::vector<RowLabel> rowLabels;
  // The overview drawn while a run loads (OverviewLayer.cpp): per rank, its row and the
  // rectangles drawn left to right as (x where it ends, shade 0 idle .. 32 busy); the
  // iteration lines.
  struct OverviewRow {
    int rank;
    ImVec4 rect;
    std::vector<std::pair<float, int>> runs;
  };
  std::vector<OverviewRow> overviewRows;
  int overviewIterationLines = 0;
  // Full-height iteration lines drawn across the timeline's rows this frame
  // (ui/IterationLines.h: none once they are closer than a few pixels).
  int timelineIterationLines = 0;
  // Captured collectives (CollectiveLayer.cpp): each member's bar, and the band tying an
  // instance's members together (a vertical line from `from` to `to`).
  struct CollectiveBar {
    int32_t instance;
    int rank;
    ImVec4 rect;
    ImU32 colour;
  };
  std::vector<CollectiveBar> collectives;
  struct CollectiveBand {
    int32_t instance;
    ImVec2 from, to;
    ImU32 colour;
  };
  std::vector<CollectiveBand> collectiveBands;
  // Text laid out wider than its window or table column (ui/ClippedText.h), the timeline's
  // canvas left out.
  std::vector<ClippedText> clippedText;
  // The grid map's content: where it ends (x, y, unscrolled screen coordinates) and how far
  // its panel scrolls (x, y): all of it is reachable when end - panel edge <= scroll range.
  ImVec4 gridMapContent;
  // The plots' labels of non-finite markers (x0, y0, x1, y1).
  std::vector<ImVec4> plotLabels;
};

}  // namespace stagescope::ui
