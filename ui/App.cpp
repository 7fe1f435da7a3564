#include "ui/App.h"

#include <algorithm>
#include <cstdio>

#include "ui/DetailsPending.h"
#include "ui/ErrorBanner.h"
#include "ui/OverviewLayer.h"
#include "ui/ReplayPanel.h"
#include "ui/ScriptVerbs.h"
#include "ui/StatusBanner.h"
#include "ui/StatusBar.h"
#include "ui/Theme.h"

namespace stagescope::ui {

App::App() {
  settings_.load(view_);
}

App::~App() {
  saveSettings();
}

void App::open(const std::string& path) {
  if (path.empty()) return;
  // The overview first (a few thousand rows): drawn while the run itself loads.
  overview_.reset();
  overviewShown_ = false;
  try {
    overview_ = storage::readOverview(path);
  } catch (const std::exception&) {
    // The full load reports what is wrong with the file.
  }
  main_.load(path);
  bannerError_.clear();
}

void App::openCompare(const std::string& path) {
  if (path.empty()) return;
  if (main_.loading())
    pendingCompare_ = path;  // aligned against the main run once that is whole
  else
    other_.load(path, main_.run);
  nav_.showTab(BottomTab::Compare);
}

bool App::runCommand(const std::string& command, std::string* error) {
  return runScriptCommand(*this, command, error);
}

std::string App::takeScreenshotRequest() {
  std::string s;
  s.swap(screenshotRequest_);
  return s;
}

void App::takeOverLoads() {
  switch (main_.poll(holdLoads_, holdDetails_)) {
    case RunSlot::Change::Opened:  // the timeline: interactive
      addRecent(view_.recent, main_.path);
      view_ = [&] {
        ViewerState v = view_;
        v.selection = {};
        v.hovered = {};
        // Open at the end of the replay: everything recorded is drawn at full brightness.
        v.step = static_cast<int64_t>(main_.run->replay.size());
        v.playing = false;
        v.fitPending = true;
        v.findDirty = true;
        v.scrollY = 0;
        return v;
      }();
      inspector_.forget();
      bottom_.forget();
      timeline_.forget();  // shares of the previous run
      nav_.zoomOpening();
      viewAtOpen_ = currentView();
      break;
    case RunSlot::Change::Details: {
      // The verdicts are in: lead to the first problem unless the user has moved on since
      // the run opened.  The compare run follows the whole main run: a pending one starts
      // now, an open one realigns.
      view_.findDirty = true;
      if (currentView() == viewAtOpen_) nav_.showFirstProblem();
      std::string compare = pendingCompare_.empty() ? other_.path : pendingCompare_;
      pendingCompare_.clear();
      if (!compare.empty()) other_.load(compare, main_.run);
      break;
    }
    case RunSlot::Change::Failed: {
      bannerError_ = main_.error;
      // A pending compare run is aligned with the run still open, if that one is whole.
      std::string compare;
      compare.swap(pendingCompare_);
      if (!compare.empty() && main_.run && main_.run->detailsLoaded)
        other_.load(compare, main_.run);
      break;
    }
    case RunSlot::Change::None:
      break;
  }
  switch (other_.poll()) {
    case RunSlot::Change::Failed:
      bannerError_ = other_.error;
      break;
    case RunSlot::Change::Opened:
      if (other_.comparedWith == main_.run)
        addRecent(view_.recent, other_.path);
      else if (main_.loading())  // the main run changed while this one loaded
        pendingCompare_ = other_.path;
      else if (main_.run && main_.run->detailsLoaded)
        other_.load(other_.path, main_.run);
      break;
    default:
      break;
  }
}

void App::frame(float dt) {
  takeOverLoads();
  nav_.advancePlayback(dt);
  probes_ = FrameProbes{};

  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(vp->Pos);
  ImGui::SetNextWindowSize(vp->Size);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
  ImGui::Begin("##root", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_MenuBar |
                   ImGuiWindowFlags_NoSavedSettings);
  ImGui::PopStyleVar();
  drawMenuBar();
  handleKeys();

  ImVec2 origin = ImGui::GetCursorScreenPos();
  ImVec2 avail = ImGui::GetContentRegionAvail();
  const float bannerH = main_.run ? 30 : 0, replayH = 38, statusH = 22, splitter = 5;
  view_.bottomHeight = std::clamp(view_.bottomHeight, 120.0f, std::max(120.0f, avail.y - 260));
  view_.inspectorWidth = std::clamp(view_.inspectorWidth, 250.0f, std::max(250.0f, avail.x - 400));
  const float middleH = avail.y - bannerH - replayH - statusH - view_.bottomHeight - splitter;
  const float timelineW = avail.x - view_.inspectorWidth - splitter;

  if (bannerH > 0) drawStatusBanner(panel_, origin, ImVec2(avail.x, bannerH));
  drawReplayBar(panel_, ImVec2(origin.x, origin.y + bannerH), ImVec2(avail.x, replayH));
  ImVec2 mid(origin.x, origin.y + bannerH + replayH);
  drawTimeline(mid, ImVec2(timelineW, middleH));
  // Vertical splitter between timeline and inspector.
  ImGui::SetCursorScreenPos(ImVec2(mid.x + timelineW, mid.y));
  ImGui::InvisibleButton("##vsplit", ImVec2(splitter, middleH));
  if (ImGui::IsItemActive()) view_.inspectorWidth -= ImGui::GetIO().MouseDelta.x;
  if (ImGui::IsItemHovered() || ImGui::IsItemActive())
    ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeEW);
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(mid.x + timelineW, mid.y),
                                            ImVec2(mid.x + timelineW + splitter, mid.y + middleH),
                                            theme::kSplitter);
  inspector_.draw(panel_, ImVec2(mid.x + timelineW + splitter, mid.y),
                  ImVec2(view_.inspectorWidth, middleH));
  // Horizontal splitter above the bottom panels.
  ImVec2 hs(origin.x, mid.y + middleH);
  ImGui::SetCursorScreenPos(hs);
  ImGui::InvisibleButton("##hsplit", ImVec2(avail.x, splitter));
  if (ImGui::IsItemActive()) view_.bottomHeight -= ImGui::GetIO().MouseDelta.y;
  if (ImGui::IsItemHovered() || ImGui::IsItemActive())
    ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeNS);
  ImGui::GetWindowDrawList()->AddRectFilled(hs, ImVec2(hs.x + avail.x, hs.y + splitter),
                                            theme::kSplitter);
  bottom_.draw(panel_, ImVec2(origin.x, hs.y + splitter), ImVec2(avail.x, view_.bottomHeight));
  drawStatusBar(panel_, ImVec2(origin.x, origin.y + avail.y - statusH), ImVec2(avail.x, statusH));
  ImGui::End();
  openDialog_.draw(panel_);
  probes_.clippedText = findClippedText({"##timeline"});
}

void App::drawTimeline(const ImVec2& pos, const ImVec2& size) {
  ImGui::SetCursorScreenPos(pos);
  ImGui::BeginChild("##timeline", size, false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  probes_.timeline = ImVec4(pos.x, pos.y, pos.x + size.x, pos.y + size.y);
  dl->AddRectFilled(pos, ImVec2(pos.x + size.x, pos.y + size.y), theme::kBackground);
  if (main_.run)
    timeline_.draw(panel_, dl, pos, size);
  else
    drawTimelineEmpty(dl, pos, size);
  if (!bannerError_.empty()) drawErrorBanner(bannerError_, pos, size);
  ImGui::EndChild();
}

void App::drawTimelineEmpty(ImDrawList* dl, const ImVec2& pos, const ImVec2& size) {
  if (overview_ && main_.loading()) {
    if (drawOverview(dl, *overview_, main_.progress(), pos, size, probes_)) overviewShown_ = true;
    return;
  }
  const char* hint =
      main_.loading() ? "Loading..." : "Open a run: File > Open, or drop a file here";
  ImVec2 ts = ImGui::CalcTextSize(hint);
  dl->AddText(ImVec2(pos.x + (size.x - ts.x) / 2, pos.y + size.y / 2 - 20), theme::kTextDim, hint);
  if (main_.loading()) {
    ImGui::SetCursorScreenPos(ImVec2(pos.x + size.x / 2 - 160, pos.y + size.y / 2));
    ImGui::ProgressBar(main_.progress(), ImVec2(320, 18));
  }
}

void App::drawMenuBar() {
  if (!ImGui::BeginMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open run...", "Ctrl+O")) {
      openDialog_.show(false);
    }
    if (ImGui::MenuItem("Open run to compare...", nullptr, false, main_.run != nullptr)) {
      openDialog_.show(true);
    }
    if (ImGui::BeginMenu("Recent", !view_.recent.empty())) {
      for (const auto& r : view_.recent)
        if (ImGui::MenuItem(r.c_str())) open(r);
      ImGui::EndMenu();
    }
    if (ImGui::MenuItem("Close compare run", nullptr, false, other_.run != nullptr)) other_.close();
    ImGui::Separator();
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) quit_ = true;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    if (ImGui::MenuItem("Zoom to fit", "F")) nav_.zoomFit();
    if (ImGui::MenuItem("Find...", "Ctrl+F")) {
      nav_.showTab(BottomTab::Find);
      bottom_.focusFind();
    }
    ImGui::MenuItem("Transfer arrows", "X", &view_.showArrows);
    ImGui::MenuItem("Planned schedule overlay", "P", &view_.showPlan);
    ImGui::MenuItem("Highlight idle gaps", "I", &view_.showIdle);
    ImGui::MenuItem("Follow replay", "L", &view_.followReplay);
    ImGui::SliderFloat("Row height", &view_.rowHeight, 14, 48, "%.0f px");
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Help")) {
    ImGui::TextUnformatted(
        "Timeline: wheel zoom, drag pan, right-drag zoom to range, click select\n"
        "W/S zoom  A/D pan  F fit  P plan overlay  X arrows  L follow replay\n"
        "Left/Right step  Shift: microbatch  Ctrl: iteration  Space play/pause\n"
        "Home/End first/last step  Ctrl+O open  Ctrl+F find");
    ImGui::EndMenu();
  }
  if (main_.run) {
    const auto& info = main_.run->model.info;
    char buf[256];
    // A captured job that declared no layout has no microbatch count: say so, never "0 mb".
    char schedule[64];
    if (info.microbatches > 0)
      std::snprintf(schedule, sizeof schedule, "%d it x %d mb", info.iterations, info.microbatches);
    else
      std::snprintf(schedule, sizeof schedule, "%d it (microbatches not declared)",
                    info.iterations);
    std::snprintf(buf, sizeof buf, "%s   %s   world %d   %s", main_.path.c_str(),
                  events::toString(info.status), info.worldSize, schedule);
    float w = ImGui::CalcTextSize(buf).x;
    ImGui::SameLine(ImGui::GetWindowWidth() - w - 16);
    ImGui::TextDisabled("%s", buf);
  }
  ImGui::EndMenuBar();
}

void App::handleKeys() {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput || !main_.run) {
    if (io.KeyCtrl && ImGui::IsKeyPressed('O')) openDialog_.reopen();
    return;
  }
  const auto& replay = main_.run->replay;
  if (io.KeyCtrl && ImGui::IsKeyPressed('O')) openDialog_.reopen();
  if (io.KeyCtrl && ImGui::IsKeyPressed('Q')) quit_ = true;
  if (io.KeyCtrl && ImGui::IsKeyPressed('F')) {
    nav_.showTab(BottomTab::Find);
    bottom_.focusFind();
  }
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) {
    if (io.KeyCtrl)
      nav_.stepTo(replay.nextIteration(view_.step));
    else if (io.KeyShift)
      nav_.stepTo(replay.nextMicrobatch(view_.step));
    else
      nav_.stepTo(view_.step + 1);
  }
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) {
    if (io.KeyCtrl)
      nav_.stepTo(replay.prevIteration(view_.step));
    else if (io.KeyShift)
      nav_.stepTo(replay.prevMicrobatch(view_.step));
    else
      nav_.stepTo(view_.step - 1);
  }
  if (io.KeyCtrl) return;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Space))) view_.playing = !view_.playing;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Home))) nav_.stepTo(0);
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_End)))
    nav_.stepTo(static_cast<int64_t>(replay.size()));
  if (ImGui::IsKeyPressed('F')) nav_.zoomFit();
  if (ImGui::IsKeyPressed('P')) view_.showPlan = !view_.showPlan;
  if (ImGui::IsKeyPressed('X')) view_.showArrows = !view_.showArrows;
  if (ImGui::IsKeyPressed('I')) view_.showIdle = !view_.showIdle;
  if (ImGui::IsKeyPressed('L')) view_.followReplay = !view_.followReplay;
  const double span = view_.viewEnd - view_.viewStart;
  const double mid = 0.5 * (view_.viewStart + view_.viewEnd);
  if (ImGui::IsKeyDown('W')) nav_.zoomTo(mid - span * 0.45, mid + span * 0.45);
  if (ImGui::IsKeyDown('S')) nav_.zoomTo(mid - span * 0.55, mid + span * 0.55);
  if (ImGui::IsKeyDown('A'))
    nav_.zoomTo(view_.viewStart - span * 0.05, view_.viewEnd - span * 0.05);
  if (ImGui::IsKeyDown('D'))
    nav_.zoomTo(view_.viewStart + span * 0.05, view_.viewEnd + span * 0.05);
}

}  // namespace stagescope::ui
