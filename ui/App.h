// The viewer application: two run slots (main and compare), background loading, the
// window layout and the panels.  Independent of GLFW/OpenGL: frame() only issues ImGui
// calls between NewFrame and Render, so bench_gui can drive it without a window.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "imgui.h"
#include "storage/Overview.h"
#include "ui/FrameProbes.h"
#include "ui/Inspector.h"
#include "ui/LoadedRun.h"
#include "ui/Navigator.h"
#include "ui/PanelContext.h"
#include "ui/Plots.h"
#include "ui/RunComparison.h"
#include "ui/RunSlot.h"
#include "ui/ScriptTarget.h"
#include "ui/TimeIndex.h"
#include "ui/ViewerState.h"

namespace stagescope::ui {

struct TimelineContext;  // ui/TimelineContext.h
struct TimelineHover;
struct TimelineArrow;
struct CollectiveBars;  // CollectiveLayer.cpp
struct GridMapContext;  // GridMap.cpp

class App : public ScriptTarget {
 public:
  App();
  ~App() override;

  void open(const std::string& path) override;
  void openCompare(const std::string& path) override;
  // Draws one frame of UI (call between ImGui::NewFrame and ImGui::Render).
  void frame(float deltaSeconds);
  // Script: returns false with *error set when the command is unknown or fails
  // (runScriptCommand, ui/ScriptVerbs.h).
  bool runCommand(const std::string& command, std::string* error);
  // Loading, or a compare run waits for the main run: script commands wait.
  // (Details held by holdDetails do not count: scripts then run on the interactive run.)
  bool busy() const {
    return (main_.loading() && !(holdDetails_ && main_.detailsPending())) || other_.loading() ||
           !pendingCompare_.empty();
  }
  bool quitRequested() const { return quit_; }
  // The rest of what a script verb may do (ScriptTarget.h).
  bool loading() const override { return main_.loading(); }
  Navigator& navigator() override { return nav_; }
  void requestScreenshot(const std::string& path) override { screenshotRequest_ = path; }
  void quit() override { quit_ = true; }
  // A screenshot the host should write after rendering this frame ("" if none).
  std::string takeScreenshotRequest();
  const FrameProbes& probes() const { return probes_; }
  void saveSettings() const;
  ViewerState& state() override { return view_; }
  const LoadedRun* run() const override { return main_.run.get(); }
  const LoadedRun* compareRun() const { return other_.run.get(); }
  // The comparison of the compare run with the open main run (none while it is realigned with
  // a main run opened since).
  const analysis::Comparison* comparison() const { return nav_.comparison(); }
  const std::string& compareError() const { return other_.error; }
  const std::string& loadError() const override { return main_.error; }
  // True once a frame drew the run's overview while the run itself was still loading.
  bool overviewShown() const { return overviewShown_; }
  // While held, a finished load is not taken over (the frames keep showing the loading state:
  // overview and progress).  For tests of that state, which otherwise lasts as long as the
  // load happens to take.
  void holdLoads(bool hold) { holdLoads_ = hold; }
  // While held, the run is interactive but its details are not taken over (the panels that
  // need them say "loading details…"), and script commands run.  For tests of that state.
  void holdDetails(bool hold) { holdDetails_ = hold; }
  // Called from a loading thread when a load phase has finished (runViewer: wakes the event
  // loop so that the finished phase is taken over at once, not at the next timed frame).
  void setWake(const std::function<void()>& wake) { main_.wake = other_.wake = wake; }
  // The open run's timeline is in and its details are still loading.
  bool detailsPending() const { return main_.detailsPending(); }
  // The error the banner shows ("" when none): a run that could not be opened or read whole.
  const std::string& bannerError() const { return bannerError_; }

 private:
  // Panels (one file each).
  void drawMenuBar();
  void drawReplayBar(const ImVec2& pos, const ImVec2& size);
  void drawTimeline(const ImVec2& pos, const ImVec2& size);
  void drawBottom(const ImVec2& pos, const ImVec2& size);
  void drawGridMap();
  // The grid map's painters (GridMap.cpp): a module's box of cells, one cell (`head`: its
  // first line), a colocated rank's dots naming its other modules.
  void drawGridModule(GridMapContext& g, size_t module);
  void drawGridCell(GridMapContext& g, size_t module, int rank, ImVec2 c0, const char* head);
  void drawSharedCellDots(const GridMapContext& g, size_t module, int rank, ImVec2 c0, ImVec2 c1,
                          ImU32 tc);
  void drawCompare();
  void drawCompareOpen();  // no compare run yet: where to open one (ComparePanel.cpp)
  void drawFind();
  void drawRunInfo();
  void drawStatusBar(const ImVec2& pos, const ImVec2& size);
  void drawOpenPopup();
  void drawErrorBanner(const ImVec2& pos, const ImVec2& size);

  void drawTimeRuler(ImDrawList* dl, const ImVec2& p0, const ImVec2& p1, double nsPerPx);
  // The run file's overview (OverviewLayer.cpp), drawn while the run loads.
  void drawOverview(ImDrawList* dl, const ImVec2& pos, const ImVec2& size);

  // The timeline (Timeline.cpp) and its layers, one painter each in the file named after its
  // layer (TimelineContext.h lists them).  A painter returns what the mouse is on in its layer;
  // drawTimelineLayers picks the hover among them.
  void drawTimelineEmpty(ImDrawList* dl, const ImVec2& pos, const ImVec2& size);
  TimelineContext timelineLayout(ImDrawList* dl, const ImVec2& pos, const ImVec2& size);
  bool timelineInput(TimelineContext& ctx);  // true when the rows were clicked
  TimelineHover drawTimelineLayers(const TimelineContext& ctx);
  void drawRowBackgrounds(const TimelineContext& ctx);
  void drawRowLabels(const TimelineContext& ctx);
  void drawIterationLines(const TimelineContext& ctx);
  TimelineHover drawActionRow(const TimelineContext& ctx, size_t row, const RankReplayState& st);
  TimelineHover drawDenseRow(const TimelineContext& ctx, size_t row, const RankReplayState& st);
  // One drawn item of a row; true when the mouse is on it.
  bool drawActionItem(const TimelineContext& ctx, size_t row, const RankReplayState& st,
                      const DrawItem& d, float* prevX1);
  // One timeline row zoomed out: its busy share per pixel column between p0.x and p1.x.
  void drawBusyRow(const TimelineContext& ctx, int rank, const RankReplayState& st,
                   const ImVec2& p0, const ImVec2& p1);
  void drawReplayCursor(const TimelineContext& ctx, size_t row, const RankReplayState& st);
  // Records the drawn block in stuckRect[rank].
  Selection drawStuck(const TimelineContext& ctx, size_t row, const RankReplayState& st,
                      std::vector<ImVec4>& stuckRect);
  void drawWaits(const TimelineContext& ctx, const std::vector<ImVec4>& stuckRect);
  Selection drawArrows(const TimelineContext& ctx);
  // Both return the mouse's distance from the arrow (far when it is outside the rows).
  float drawLocalLoop(const TimelineContext& ctx, const TimelineArrow& arrow,
                      const events::TransferRecord& t, float* lastLabel);
  float drawStraightArrow(const TimelineContext& ctx, const TimelineArrow& arrow,
                          const events::TransferRecord& t);
  // A captured job's plan overlay (CapturedPlanLayer.cpp): the plan's actions over the
  // operations that carried them, deviations in red.
  void drawCapturedPlan(const TimelineContext& ctx);
  // Captured collectives (CollectiveLayer.cpp): bars per member, bands across the group.  On
  // a band (not a bar) the returned hover's rank is -1: the rank under it is kept.
  Selection drawCollectives(const TimelineContext& ctx);
  CollectiveBars drawCollectiveBars(const TimelineContext& ctx, int32_t instance, bool selected,
                                    Selection* hover);
  void drawTimeCursors(const TimelineContext& ctx);
  void drawTimelineTooltip(const TimelineContext& ctx, const TimelineHover& hover);
  void actionTooltip(const TimelineContext& ctx, const TimelineHover& hover);
  void transferTooltip(const TimelineContext& ctx, int64_t index);
  void stuckTooltip(const TimelineContext& ctx, int rank);
  void collectiveTooltip(int64_t index);

  void loadSettings();
  bool settingsUnsaved_ = false;  // viewer.ini is not a regular file: never replaced
  void addRecent(const std::string& path);
  void handleKeys();

  RunSlot main_, other_;
  std::string pendingCompare_;  // opened while the main run was loading: loaded after it
  std::optional<storage::RunOverview> overview_;  // of the run being opened (none: old file)
  bool overviewShown_ = false;
  bool holdLoads_ = false, holdDetails_ = false;
  // The view when the run became interactive: when the details arrive and the user has not
  // moved or selected anything since, the first problem is shown (as when a run opens whole).
  struct ViewAtOpen {
    double start = 0, end = 0;
    int64_t step = 0;
    Selection selection;
    bool operator==(const ViewAtOpen&) const = default;
  };
  ViewAtOpen viewAtOpen_;
  ViewAtOpen currentView() const {
    return {view_.viewStart, view_.viewEnd, view_.step, view_.selection};
  }
  ViewerState view_;
  Navigator nav_{view_, main_, other_};
  FrameProbes probes_;
  PanelContext panel_{main_, other_, view_, probes_, nav_};  // what each panel is handed
  std::vector<DrawItem> drawScratch_;
  // drawBusyRow: per rank, the busy shares of the last columns drawn and what they were for.
  struct BusyCache {
    const LoadedRun* run = nullptr;
    double t0 = 0, nsPerPx = 0;
    int columns = 0;
    std::vector<float> busy;
  };
  std::vector<BusyCache> busyCache_;
  std::string screenshotRequest_;
  std::string openPathBuffer_;
  bool openPopup_ = false, openCompareMode_ = false;
  bool quit_ = false;
  bool focusFind_ = false;  // Ctrl+F: the Find panel's first field takes the keyboard
  std::string bannerError_;
  // Range selection on the timeline (right drag).
  bool rangeSelecting_ = false;
  double rangeStartNs_ = 0;
  Plots plots_;
  Inspector inspector_;
};

}  // namespace stagescope::ui
