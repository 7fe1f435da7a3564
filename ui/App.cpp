#include "ui/App.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/events/CapturedLayout.h"
#include "ui/Theme.h"

namespace stagescope::ui {

App::App() {
  loadSettings();
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
  view_.tab = BottomTab::Compare;
  view_.tabRequested = true;
}

std::string App::takeScreenshotRequest() {
  std::string s;
  s.swap(screenshotRequest_);
  return s;
}

void App::frame(float dt) {
  switch (main_.poll(holdLoads_, holdDetails_)) {
    case RunSlot::Change::Opened:  // the timeline: interactive
      addRecent(main_.path);
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
      payloadFor_ = -2;
      plotsFor_ = nullptr;
      busyCache_.clear();  // shares of the previous run
      zoomOpening();
      viewAtOpen_ = currentView();
      break;
    case RunSlot::Change::Details: {
      // The verdicts are in: lead to the first problem unless the user has moved on since
      // the run opened.  The compare run follows the whole main run: a pending one starts
      // now, an open one realigns.
      view_.findDirty = true;
      if (currentView() == viewAtOpen_) showFirstProblem();
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
        addRecent(other_.path);
      else if (main_.loading())  // the main run changed while this one loaded
        pendingCompare_ = other_.path;
      else if (main_.run && main_.run->detailsLoaded)
        other_.load(other_.path, main_.run);
      break;
    default:
      break;
  }
  advancePlayback(dt);
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

  if (bannerH > 0) drawStatusBanner(origin, ImVec2(avail.x, bannerH));
  drawReplayBar(ImVec2(origin.x, origin.y + bannerH), ImVec2(avail.x, replayH));
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
  drawInspector(ImVec2(mid.x + timelineW + splitter, mid.y), ImVec2(view_.inspectorWidth, middleH));
  // Horizontal splitter above the bottom panels.
  ImVec2 hs(origin.x, mid.y + middleH);
  ImGui::SetCursorScreenPos(hs);
  ImGui::InvisibleButton("##hsplit", ImVec2(avail.x, splitter));
  if (ImGui::IsItemActive()) view_.bottomHeight -= ImGui::GetIO().MouseDelta.y;
  if (ImGui::IsItemHovered() || ImGui::IsItemActive())
    ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeNS);
  ImGui::GetWindowDrawList()->AddRectFilled(hs, ImVec2(hs.x + avail.x, hs.y + splitter),
                                            theme::kSplitter);
  drawBottom(ImVec2(origin.x, hs.y + splitter), ImVec2(avail.x, view_.bottomHeight));
  drawStatusBar(ImVec2(origin.x, origin.y + avail.y - statusH), ImVec2(avail.x, statusH));
  ImGui::End();
  drawOpenPopup();
  probes_.clippedText = findClippedText({"##timeline"});
}

void App::drawMenuBar() {
  if (!ImGui::BeginMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open run...", "Ctrl+O")) {
      openPopup_ = true;
      openCompareMode_ = false;
    }
    if (ImGui::MenuItem("Open run to compare...", nullptr, false, main_.run != nullptr)) {
      openPopup_ = true;
      openCompareMode_ = true;
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
    if (ImGui::MenuItem("Zoom to fit", "F")) zoomFit();
    if (ImGui::MenuItem("Find...", "Ctrl+F")) {
      view_.tab = BottomTab::Find;
      view_.tabRequested = true;
      focusFind_ = true;
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

void App::drawStatusBar(const ImVec2& pos, const ImVec2& size) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(pos, ImVec2(pos.x + size.x, pos.y + size.y), theme::kStatusBar);
  ImGui::SetCursorScreenPos(ImVec2(pos.x + 8, pos.y + 3));
  const LoadedRun* r = main_.run.get();
  if (main_.loading() && !main_.detailsPending()) {
    ImGui::Text("Loading %s", main_.path.c_str());
    ImGui::SameLine();
    ImGui::ProgressBar(main_.progress(), ImVec2(240, 16));
  } else if (r && !r->detailsLoaded) {
    size_t events = r->model.transfers.size();
    for (const auto& a : r->model.actions) events += a.size();
    ImGui::Text("%zu actions and transfers   %zu ranks   timeline in %.2f s (+%.2f s index)   %s",
                events, static_cast<size_t>(r->model.rankCount()), r->loadSeconds, r->indexSeconds,
                detailsNote().c_str());
    if (main_.detailsPending()) {
      ImGui::SameLine();
      ImGui::ProgressBar(main_.progress(), ImVec2(200, 16));
    }
  } else if (r) {
    size_t events = r->model.transfers.size() + r->model.gradients.size() + r->model.losses.size();
    for (const auto& a : r->model.actions) events += a.size();
    ImGui::Text("%zu events   %zu ranks   timeline in %.2f s (+%.2f s index), details %.2f s   %s",
                events, static_cast<size_t>(r->model.rankCount()), r->loadSeconds, r->indexSeconds,
                r->detailsSeconds, r->model.partial ? "PARTIAL RUN" : "");
    if (r->replay.brokenConstraints())
      ImGui::SameLine(),
          ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%zu causal constraints could not be met",
                             r->replay.brokenConstraints());
  } else {
    ImGui::TextDisabled("No run open. File > Open, or drop a run file on the window.");
  }
  if (other_.loading()) {
    ImGui::SameLine();
    ImGui::Text("   compare: loading");
    ImGui::SameLine();
    ImGui::ProgressBar(other_.progress(), ImVec2(160, 16));
  } else if (other_.run) {
    ImGui::SameLine();
    ImGui::TextDisabled("   compare: %s", other_.path.c_str());
  }
}

void App::drawOpenPopup() {
  if (openPopup_) {
    ImGui::OpenPopup("Open run");
    openPopup_ = false;
  }
  ImGui::SetNextWindowSize(ImVec2(560, 0), ImGuiCond_Appearing);
  if (ImGui::BeginPopupModal("Open run", nullptr, ImGuiWindowFlags_NoSavedSettings)) {
    ImGui::TextUnformatted(openCompareMode_ ? "Run file to compare with the open run:"
                                            : "Run file (.db)");
    if (ImGui::IsWindowAppearing()) ImGui::SetKeyboardFocusHere();
    char buf[1024];
    std::snprintf(buf, sizeof buf, "%s", openPathBuffer_.c_str());
    bool enter = ImGui::InputText("##path", buf, sizeof buf, ImGuiInputTextFlags_EnterReturnsTrue);
    openPathBuffer_ = buf;
    if (!view_.recent.empty()) {
      ImGui::TextDisabled("Recent");
      for (const auto& r : view_.recent)
        if (ImGui::Selectable(r.c_str())) openPathBuffer_ = r;
    }
    if (ImGui::Button("Open") || enter) {
      if (openCompareMode_)
        openCompare(openPathBuffer_);
      else
        open(openPathBuffer_);
      ImGui::CloseCurrentPopup();
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape)))
      ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
}

void App::drawErrorBanner(const ImVec2& pos, const ImVec2& size) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 p0(pos.x + 24, pos.y + 24);
  ImVec2 p1(pos.x + size.x - 24, pos.y + 24 + 86);
  dl->AddRectFilled(p0, p1, theme::kErrorBanner, 3);
  dl->AddRectFilled(p0, ImVec2(p0.x + 5, p1.y), theme::kBad, 3);
  dl->AddText(ImVec2(p0.x + 16, p0.y + 10), theme::kErrorTitle, "Could not open the run");
  dl->AddText(nullptr, 0, ImVec2(p0.x + 16, p0.y + 34), theme::kText, bannerError_.c_str(), nullptr,
              p1.x - p0.x - 32);
  ImGui::SetCursorScreenPos(ImVec2(p1.x - 80, p0.y + 8));
  if (ImGui::SmallButton("Dismiss")) bannerError_.clear();
}

void App::handleKeys() {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput || !main_.run) {
    if (io.KeyCtrl && ImGui::IsKeyPressed('O')) openPopup_ = true;
    return;
  }
  const auto& replay = main_.run->replay;
  if (io.KeyCtrl && ImGui::IsKeyPressed('O')) openPopup_ = true;
  if (io.KeyCtrl && ImGui::IsKeyPressed('Q')) quit_ = true;
  if (io.KeyCtrl && ImGui::IsKeyPressed('F')) {
    view_.tab = BottomTab::Find;
    view_.tabRequested = true;
    focusFind_ = true;
  }
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) {
    if (io.KeyCtrl)
      stepTo(replay.nextIteration(view_.step));
    else if (io.KeyShift)
      stepTo(replay.nextMicrobatch(view_.step));
    else
      stepTo(view_.step + 1);
  }
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) {
    if (io.KeyCtrl)
      stepTo(replay.prevIteration(view_.step));
    else if (io.KeyShift)
      stepTo(replay.prevMicrobatch(view_.step));
    else
      stepTo(view_.step - 1);
  }
  if (io.KeyCtrl) return;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Space))) view_.playing = !view_.playing;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Home))) stepTo(0);
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_End)))
    stepTo(static_cast<int64_t>(replay.size()));
  if (ImGui::IsKeyPressed('F')) zoomFit();
  if (ImGui::IsKeyPressed('P')) view_.showPlan = !view_.showPlan;
  if (ImGui::IsKeyPressed('X')) view_.showArrows = !view_.showArrows;
  if (ImGui::IsKeyPressed('I')) view_.showIdle = !view_.showIdle;
  if (ImGui::IsKeyPressed('L')) view_.followReplay = !view_.followReplay;
  const double span = view_.viewEnd - view_.viewStart;
  const double mid = 0.5 * (view_.viewStart + view_.viewEnd);
  if (ImGui::IsKeyDown('W')) zoomTo(mid - span * 0.45, mid + span * 0.45);
  if (ImGui::IsKeyDown('S')) zoomTo(mid - span * 0.55, mid + span * 0.55);
  if (ImGui::IsKeyDown('A')) zoomTo(view_.viewStart - span * 0.05, view_.viewEnd - span * 0.05);
  if (ImGui::IsKeyDown('D')) zoomTo(view_.viewStart + span * 0.05, view_.viewEnd + span * 0.05);
}

void App::zoomFit() {
  if (!main_.run) return;
  const auto& m = main_.run->model;
  double pad = std::max<double>(1000, 0.01 * static_cast<double>(m.maxTimeNs - m.minTimeNs));
  view_.viewStart = static_cast<double>(m.minTimeNs) - pad;
  view_.viewEnd = static_cast<double>(m.maxTimeNs) + pad;
  view_.fitPending = false;
}

// A captured job spends its first part starting up: ranks that come up late, rendezvous and
// setup collectives, receives posted long before anything is sent (most of a short run),
// which squeezed the pipeline schedule into a sliver at the right edge.  It opens from its
// first send on; the start-up is one F (zoom to fit) away.  A recorded run, whose schedule
// starts at once, opens whole.
void App::zoomOpening() {
  zoomFit();
  const LoadedRun* r = main_.run.get();
  if (!r || !events::isCapturedConfig(r->model.info.configText)) return;
  const auto& m = r->model;
  int64_t first = m.maxTimeNs;
  for (const auto& t : m.transfers)
    if (t.side == events::Side::Send) first = std::min(first, t.startNs);
  const double whole = static_cast<double>(m.maxTimeNs - m.minTimeNs);
  const double schedule = static_cast<double>(m.maxTimeNs - first);
  if (schedule <= 0 || schedule > 0.9 * whole) return;  // the start-up is short: show it all
  const double pad = std::max(1000.0, 0.02 * schedule);
  view_.viewStart = static_cast<double>(first) - pad;
  view_.viewEnd = static_cast<double>(m.maxTimeNs) + pad;
}

void App::zoomTo(double t0, double t1) {
  if (t1 - t0 < 100) {
    double mid = 0.5 * (t0 + t1);
    t0 = mid - 50;
    t1 = mid + 50;
  }
  view_.viewStart = t0;
  view_.viewEnd = t1;
}

void App::focusAction(int rank, int64_t action) {
  const LoadedRun* r = main_.run.get();
  if (!r || rank < 0 || rank >= static_cast<int>(r->model.actions.size())) return;
  const auto& acts = r->model.actions[rank];
  if (action < 0 || action >= static_cast<int64_t>(acts.size())) return;
  const auto& a = acts[action];
  double span = view_.viewEnd - view_.viewStart;
  double d = static_cast<double>(a.endNs - a.startNs);
  if (span > 60 * d + 5e6 || span < 2 * d) span = std::max(20 * d, 4e6);
  double mid = 0.5 * static_cast<double>(a.startNs + a.endNs);
  zoomTo(mid - span / 2, mid + span / 2);
}

void App::select(const Selection& s, bool navigate) {
  view_.selection = s;
  const LoadedRun* r = main_.run.get();
  if (!r || !navigate) return;
  if (s.kind == Selection::Kind::Action)
    focusAction(s.rank, s.index);
  else if (s.kind == Selection::Kind::Transfer)
    focusTransfer(s.index, true);
  else if (s.kind == Selection::Kind::Collective)
    focusCollective(s.index);
}

void App::focusTransfer(int64_t index, bool step) {
  const LoadedRun* r = main_.run.get();
  if (!r || index < 0 || index >= static_cast<int64_t>(r->transferPair.size())) return;
  const int32_t pair = r->transferPair[index];
  if (pair < 0) return;
  const PairActions& pa = r->pairActions[pair];
  const auto& acts = r->model.actions;
  if (pa.sendAction < 0 && pa.recvAction < 0) return;
  const events::ActionRecord& first =
      pa.sendAction >= 0 ? acts[pa.sendRank][pa.sendAction] : acts[pa.recvRank][pa.recvAction];
  const events::ActionRecord& second =
      pa.recvAction >= 0 ? acts[pa.recvRank][pa.recvAction] : first;
  double t0 = static_cast<double>(std::min(first.startNs, second.startNs));
  double t1 = static_cast<double>(std::max(first.endNs, second.endNs));
  double pad = std::max(2e6, (t1 - t0) * 3);
  zoomTo(t0 - pad, t1 + pad);
  if (step && pa.recvAction >= 0)
    stepTo(r->replay.positionOf(pa.recvRank, pa.recvAction, false) + 1);
}

void App::stepTo(int64_t step) {
  const LoadedRun* r = main_.run.get();
  if (!r) return;
  view_.step = std::clamp<int64_t>(step, 0, static_cast<int64_t>(r->replay.size()));
  if (view_.followReplay && view_.step > 0) {
    const ReplayStep& st = r->replay.steps()[view_.step - 1];
    const auto& a = r->model.actions[st.rank][st.action];
    double t = static_cast<double>(st.end ? a.endNs : a.startNs);
    double span = view_.viewEnd - view_.viewStart;
    if (t < view_.viewStart + span * 0.1 || t > view_.viewEnd - span * 0.1)
      zoomTo(t - span * 0.5, t + span * 0.5);
  }
}

void App::advancePlayback(float dt) {
  if (!view_.playing || !main_.run) return;
  view_.playAccumulator += static_cast<double>(dt) * view_.speed;
  int64_t n = static_cast<int64_t>(view_.playAccumulator);
  if (n > 0) {
    view_.playAccumulator -= static_cast<double>(n);
    stepTo(view_.step + n);
    if (view_.step >= static_cast<int64_t>(main_.run->replay.size())) view_.playing = false;
  }
}

bool App::showNonFinite() {
  const LoadedRun* r = main_.run.get();
  if (!r) return false;
  const NonFinite& n = r->problems.firstNonFinite;
  switch (n.kind) {
    case NonFinite::Kind::None:
      return false;
    case NonFinite::Kind::Transfer:
      select({Selection::Kind::Transfer, n.rank, n.index}, false);
      focusTransfer(n.index, false);  // the replay stays where it is (the end when opening)
      break;
    case NonFinite::Kind::Gradient:
      select({Selection::Kind::Gradient, n.rank, n.index}, false);
      if (n.action >= 0) focusAction(n.rank, n.action);
      break;
    case NonFinite::Kind::Loss:
      select({Selection::Kind::Loss, n.rank, n.index}, false);
      if (n.action >= 0) focusAction(n.rank, n.action);
      break;
  }
  return true;
}

bool App::showStuck() {
  const LoadedRun* r = main_.run.get();
  if (!r || r->problems.firstStuckRank < 0) return false;
  const int rank = r->problems.firstStuckRank;
  const auto& acts = r->model.actions[rank];
  // Stuck actions are drawn after each rank's last completed one: select the root's (the
  // inspector explains it) and show where every rank of the wait-for graph got stuck.
  select({Selection::Kind::Stuck, rank, -1}, false);
  if (!acts.empty()) {
    double t0 = static_cast<double>(acts.back().startNs);
    for (const WaitEdge& w : r->problems.waits)
      for (int k : {w.rank, w.waitsOn})
        if (!r->model.actions[k].empty())
          t0 = std::min(t0, static_cast<double>(r->model.actions[k].back().endNs));
    const double t1 = static_cast<double>(r->model.maxTimeNs);
    const double pad = std::max(1e6, 0.08 * (t1 - t0));
    zoomTo(t0 - pad, t1 + 2 * pad);
  }
  view_.tab = BottomTab::GridMap;
  view_.tabRequested = true;
  return true;
}

bool App::showDivergence() {
  const analysis::Comparison* c = comparison();
  const LoadedRun* r = main_.run.get();
  if (!c || !c->first || !r) return false;
  const analysis::AlignedItem& it = *c->first;
  if (it.a < 0) return false;  // only in B: nothing of run A to show
  switch (it.kind) {
    case analysis::ItemKind::Transfer:
      select({Selection::Kind::Transfer, r->model.transfers[it.a].rank, it.a}, false);
      focusTransfer(it.a, false);
      break;
    case analysis::ItemKind::Gradient:
      select({Selection::Kind::Gradient, r->model.gradients[it.a].rank, it.a}, false);
      break;
    case analysis::ItemKind::Loss:
      select({Selection::Kind::Loss, r->model.losses[it.a].rank, it.a}, false);
      break;
    case analysis::ItemKind::Input:
      break;  // inputs have no selection of their own: the compare tab names the sample
  }
  view_.tab = BottomTab::Compare;
  view_.tabRequested = true;
  return true;
}

void App::showFirstProblem() {
  const LoadedRun* r = main_.run.get();
  if (r && r->problems.corruptMessages > 0) {  // corruption comes before the NaNs it causes
    const int64_t t = r->problems.firstCorruptTransfer;
    select({Selection::Kind::Transfer, r->model.transfers[t].rank, t}, false);
    focusTransfer(t, false);
    return;
  }
  if (!showNonFinite()) showStuck();
}

}  // namespace stagescope::ui
