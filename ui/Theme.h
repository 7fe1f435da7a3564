// The viewer's palette and fonts: every colour a panel or timeline layer draws with, named
// after what it marks, and the ImGui style (apply).  Colours are ImU32 (IM_COL32: R, G, B, A).
#pragma once

#include "imgui.h"
#include "ui/RunProblems.h"

namespace stagescope::ui {

namespace theme {
void apply(ImGuiIO& io);
ImU32 moduleColour(int moduleIndex, bool backward, float alpha = 1.0f);
ImU32 actionColour(int moduleIndex, int kind, float alpha = 1.0f);
ImU32 textOn(ImU32 background);
ImU32 fateColour(RankFate fate);  // grid cells, timeline badges and stuck actions
extern ImFont* mono;
// Fill of a timeline cell by how busy its rank was there (0 idle .. 1 always in an action):
// dark for a bubble, bright for a busy stretch (OverviewLayer.cpp).
ImU32 heatColour(float busy);
constexpr ImU32 kBackground = IM_COL32(24, 25, 28, 255);
constexpr ImU32 kRowA = IM_COL32(32, 34, 38, 255);
constexpr ImU32 kRowB = IM_COL32(36, 38, 43, 255);
constexpr ImU32 kGrid = IM_COL32(60, 63, 70, 255);
constexpr ImU32 kText = IM_COL32(215, 218, 224, 255);
constexpr ImU32 kTextDim = IM_COL32(140, 145, 155, 255);
constexpr ImU32 kAccent = IM_COL32(255, 200, 60, 255);
constexpr ImU32 kBad = IM_COL32(235, 80, 80, 255);
constexpr ImU32 kGood = IM_COL32(110, 200, 120, 255);
constexpr ImU32 kBridge = IM_COL32(255, 170, 60, 255);
constexpr ImU32 kP2P = IM_COL32(140, 190, 255, 200);
constexpr ImU32 kGradArrow = IM_COL32(220, 140, 255, 200);
constexpr ImU32 kSelected = IM_COL32(255, 255, 255, 255);    // the selection's outline
constexpr ImU32 kGradient = IM_COL32(220, 140, 255, 255);    // gradients (plots, inspector)
constexpr ImU32 kInfo = IM_COL32(110, 170, 255, 255);        // the inspector's "Run" header
constexpr ImU32 kHeaderBand = IM_COL32(44, 47, 54, 255);     // module headers, section headers
constexpr ImU32 kBarBackground = IM_COL32(34, 36, 41, 255);  // the ruler, the replay bar
// The window.
constexpr ImU32 kSplitter = IM_COL32(20, 21, 24, 255);
constexpr ImU32 kStatusBar = IM_COL32(36, 38, 43, 255);
constexpr ImU32 kInspectorBackground = IM_COL32(30, 32, 36, 255);
constexpr ImU32 kErrorBanner = IM_COL32(70, 30, 32, 255);  // "Could not open the run"
constexpr ImU32 kErrorTitle = IM_COL32(255, 200, 200, 255);
// The status banner.
constexpr ImU32 kBannerBackground = IM_COL32(40, 42, 48, 255);
constexpr ImU32 kBadgeNeutral = IM_COL32(90, 94, 104, 255);  // the recorded status's badge
constexpr ImU32 kBannerGood = IM_COL32(30, 44, 34, 255);
constexpr ImU32 kBannerBad = IM_COL32(66, 28, 30, 255);
constexpr ImU32 kBannerBadText = IM_COL32(255, 215, 215, 255);
// The replay bar.
constexpr ImU32 kReplayProgress = IM_COL32(80, 110, 150, 255);
constexpr ImU32 kReplayTick = IM_COL32(200, 200, 210, 120);
// The plots.
constexpr ImU32 kPlotBackground = IM_COL32(32, 34, 38, 255);
constexpr ImU32 kPlotGrid = IM_COL32(50, 53, 60, 255);
constexpr ImU32 kCommunication = IM_COL32(120, 143, 168, 255);
constexpr ImU32 kIdle = IM_COL32(90, 45, 45, 255);
// The loading overview.
constexpr ImU32 kOverviewIterationLine = IM_COL32(230, 230, 240, 90);
// The timeline.
constexpr ImU32 kIterationMarker = IM_COL32(230, 230, 240, 200);  // the ruler's triangles
constexpr ImU32 kIterationLabel = IM_COL32(60, 64, 74, 255);      // "it 3" on the ruler
constexpr ImU32 kIterationLabelText = IM_COL32(235, 235, 245, 255);
constexpr ImU32 kIterationLine = IM_COL32(230, 230, 240, 70);  // across the rows
constexpr ImU32 kLaneSeparator = IM_COL32(70, 74, 84, 255);    // between a split row's lanes
constexpr ImU32 kLabelRowA = IM_COL32(36, 38, 44, 255);        // the labels column, even rows
constexpr ImU32 kLabelRowB = IM_COL32(40, 42, 48, 255);        // odd rows
constexpr ImU32 kSharedBadge = IM_COL32(70, 74, 86, 255);      // a colocated rank's badge
constexpr ImU32 kFoldCount = IM_COL32(230, 230, 230, 160);     // actions in a folded cell
constexpr ImU32 kIdleGap = IM_COL32(200, 70, 60, 110);         // idle between two actions
constexpr ImU32 kStuckText = IM_COL32(255, 235, 225, 255);     // a stuck block's label
constexpr ImU32 kArrowShadow = IM_COL32(20, 20, 20, 200);      // under a wait-for arrow
constexpr ImU32 kCycle = IM_COL32(236, 96, 210, 255);          // a wait that is part of a cycle
constexpr ImU32 kCollective = IM_COL32(70, 200, 190, 255);
constexpr ImU32 kCollectiveBand = IM_COL32(70, 200, 190, 60);
constexpr ImU32 kLabelBackdrop = IM_COL32(24, 25, 28, 200);  // under a label over the rows
constexpr ImU32 kReplayLine = IM_COL32(255, 200, 60, 150);   // the replay step's moment
constexpr ImU32 kRangeSelection = IM_COL32(110, 170, 255, 50);
// The grid map.
constexpr ImU32 kGridModuleBox = IM_COL32(36, 38, 44, 255);
constexpr ImU32 kCellIdle = IM_COL32(48, 51, 58, 255);
constexpr ImU32 kCellWaiting = IM_COL32(150, 105, 30, 255);  // waiting on a peer
constexpr ImU32 kCellCommunicating = IM_COL32(80, 92, 110, 255);
constexpr ImU32 kCellFinished = IM_COL32(40, 60, 46, 255);
constexpr ImU32 kCellBorder = IM_COL32(75, 80, 90, 255);
constexpr ImU32 kStoredPip = IM_COL32(255, 210, 90, 230);  // stored activations
constexpr ImU32 kDotOutline = IM_COL32(20, 20, 24, 255);
}  // namespace theme

}  // namespace stagescope::ui
