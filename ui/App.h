// The viewer application: two run slots (main and compare), background loading, the
// window layout and the panels.  Independent of GLFW/OpenGL: frame() only issues ImGui
// calls between NewFrame and Render, so bench_gui can drive it without a window.
//
// A composition: the App owns the runs and the view, lays the window out, and hands each
// panel a PanelContext (the runs, the view, the probes, the Navigator, itself as RunOpener);
// each panel keeps its own state (Timeline, Inspector, BottomPanel, OpenDialog).  Scripts
// reach it through ScriptTarget (ScriptVerbs.h), never its members.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "imgui.h"
#include "storage/Overview.h"
#include "ui/BottomPanel.h"
#include "ui/FrameProbes.h"
#include "ui/Inspector.h"
#include "ui/LoadedRun.h"
#include "ui/Navigator.h"
#include "ui/OpenDialog.h"
#include "ui/PanelContext.h"
#include "ui/RunSlot.h"
#include "ui/ScriptTarget.h"
#include "ui/Settings.h"
#include "ui/Timeline.h"
#include "ui/ViewerState.h"

namespace stagescope::ui {

class App : public ScriptTarget {
 public:
  App();
  ~App() override;

  void open(const std::string& path) override;
  void openCompare(const std::string& path) override;
  const std::string& pendingCompare() const override { return pendingCompare_; }
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
  void saveSettings() const { settings_.save(view_); }
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
  // At the frame's start: takes the runs' finished load phases over (a run opened: the view
  // resets and the panels forget the previous run; details in: the first problem is shown)
  // and starts the compare run's alignment when the main run is whole.
  void takeOverLoads();
  void drawMenuBar();
  // The timeline's place: the timeline, or while no run is open the overview of the one
  // loading, the progress, or a hint (drawTimelineEmpty); the error banner over either.
  void drawTimeline(const ImVec2& pos, const ImVec2& size);
  void drawTimelineEmpty(ImDrawList* dl, const ImVec2& pos, const ImVec2& size);
  // The keys: Ctrl+O/Q/F, the replay (arrows, Space, Home/End), the view (W/S/A/D, F, P, X,
  // I, L).
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
  PanelContext panel_{main_, other_, view_, probes_, nav_, *this};  // what each panel is handed
  std::string screenshotRequest_;
  OpenDialog openDialog_;
  ViewerSettings settings_;
  bool quit_ = false;
  std::string bannerError_;
  BottomPanel bottom_;
  Timeline timeline_;
  Inspector inspector_;
};

}  // namespace stagescope::ui
