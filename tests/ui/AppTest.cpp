// The real App driven headlessly (ImGui with a font atlas but no window or renderer), frame by
// frame as runViewer drives it: the script runner, then App::frame.  Proves that loading the
// main run and a compare run given at launch is deterministic: the compare run is always
// aligned with the main run, and no script command ever finds "no run is open".
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "core/analysis/Replicas.h"
#include "core/events/CapturedLayout.h"
#include "imgui.h"
#include "storage/RunFileWriter.h"
#include "storage/RunReader.h"
#include "tests/support/SyntheticRun.h"
#include "ui/App.h"
#include "ui/ScriptRunner.h"
#include "ui/Theme.h"

namespace stagescope::ui {
namespace {

namespace fs = std::filesystem;
using namespace stagescope::testing;

class HeadlessImGui {
 public:
  HeadlessImGui() {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(1400, 900);
    theme::apply(io);
    unsigned char* px = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&px, &w, &h);
  }
  ~HeadlessImGui() { ImGui::DestroyContext(); }
  void frame(App& app) {
    ImGui::GetIO().DeltaTime = 1.0f / 60;
    ImGui::NewFrame();
    app.frame(1.0f / 60);
    ImGui::Render();
  }
};

struct Fixture {
  fs::path dir;
  std::string a, b;
  Fixture() {
    dir = fs::temp_directory_path() / ("stagescope_app_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);  // this test's own directory (named by our pid)
    fs::create_directories(dir / "config");
    setenv("XDG_CONFIG_HOME", (dir / "config").c_str(), 1);
    a = (dir / "a.db").string();
    b = (dir / "b.db").string();
    storage::writeRunFile(makeSyntheticRun(defaultSyntheticSpec()), a);
    SyntheticSpec other = alternateLayoutSpec();
    other.divergeIteration = 1;
    other.divergeMicrobatch = 2;
    storage::writeRunFile(makeSyntheticRun(other), b);
  }
  ~Fixture() { fs::remove_all(dir); }
};

// Runs `script` to its end; returns the first error ("" when every command ran).
std::string runScript(HeadlessImGui& gui, App& app, std::vector<std::string> script) {
  ScriptRunner runner(std::move(script));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string err;
    ScriptRunner::Tick t = runner.tick(app, &err);
    if (t == ScriptRunner::Tick::Failed) return err;
    if (t == ScriptRunner::Tick::Finished) return "";
    gui.frame(app);
  }
  return "script did not finish within 2 minutes (a load never completed)";
}

TEST(AppLaunch, CompareRunGivenAtLaunchIsAlwaysLoadedAndAligned) {
  Fixture fx;
  HeadlessImGui gui;
  // runViewer's launch: open A, then the script starts with "open-compare B".  Before the
  // fix, a script command could run after the loading thread finished but before the frame
  // took the run over: the compare run was loaded without alignment, or "step" failed.
  for (int launch = 0; launch < 25; ++launch) {
    App app;
    app.open(fx.a);
    std::string err = runScript(gui, app, {"open-compare " + fx.b, "step 5", "jump-divergence"});
    ASSERT_EQ(err, "") << "launch " << launch;
    ASSERT_NE(app.run(), nullptr) << "launch " << launch;
    ASSERT_NE(app.compareRun(), nullptr) << "launch " << launch;
    ASSERT_NE(app.comparison(), nullptr) << "launch " << launch;
    EXPECT_TRUE(app.comparison()->first.has_value()) << "launch " << launch;
  }
}

TEST(AppLaunch, CompareOpenedWhileTheMainRunLoadsWaitsForIt) {
  Fixture fx;
  HeadlessImGui gui;
  for (int launch = 0; launch < 10; ++launch) {
    App app;
    app.open(fx.a);
    app.openCompare(fx.b);  // the main run is still loading
    EXPECT_TRUE(app.busy());
    ASSERT_EQ(runScript(gui, app, {"step 3"}), "") << "launch " << launch;
    ASSERT_NE(app.comparison(), nullptr) << "launch " << launch;
  }
}

// Progressive loading: while the run loads, the timeline shows the run file's overview (a
// heat row per rank with its bubbles, the iteration boundaries) and the progress; once the
// load is taken over, the run itself.  holdLoads pins the loading state, however fast the
// load is.
TEST(AppLaunch, OverviewShowsTheStructureWhileTheRunLoads) {
  Fixture fx;
  HeadlessImGui gui;
  const model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  App app;
  app.holdLoads(true);
  app.open(fx.a);
  for (int i = 0; i < 3; ++i) gui.frame(app);
  ASSERT_EQ(app.run(), nullptr);
  ASSERT_TRUE(app.overviewShown());
  const FrameProbes& p = app.probes();
  ASSERT_EQ(p.overviewRows.size(), static_cast<size_t>(m.rankCount()));
  EXPECT_EQ(p.overviewIterationLines, m.info.iterations);
  // Per rank: where it first computes (first run at least half busy), and whether the middle of
  // the run (away from the warm-up and the drain) has idle stretches between busy ones.
  std::map<int, float> firstBusyX;
  int rowsWithInnerBubbles = 0;
  for (const auto& row : p.overviewRows) {
    const float w = row.rect.z - row.rect.x;
    float x0 = row.rect.x;
    bool innerIdle = false, innerBusy = false;
    for (const auto& [x1, shade] : row.runs) {
      if (shade >= 16 && !firstBusyX.count(row.rank)) firstBusyX[row.rank] = x0;
      if (x0 > row.rect.x + 0.15f * w && x1 < row.rect.z - 0.15f * w) {
        innerIdle |= shade <= 8;
        innerBusy |= shade >= 16;
      }
      x0 = x1;
    }
    rowsWithInnerBubbles += innerIdle && innerBusy;
  }
  // Every llm rank shows bubbles inside its iterations (waiting in a receive is not busy).
  int llmRanks = 0;
  for (const auto& r : m.ranks) llmRanks += r.module == "llm";
  EXPECT_GE(rowsWithInnerBubbles, llmRanks);
  // The pipeline's warm-up: the last llm stage starts computing after the first.
  int first = -1, last = -1, lastPp = -1;
  for (const auto& r : m.ranks) {
    if (r.module != "llm" || r.dp != 0 || r.tp != 0) continue;
    if (r.pp == 0) first = r.rank;
    if (r.pp > lastPp) lastPp = r.pp, last = r.rank;
  }
  ASSERT_TRUE(firstBusyX.count(first) && firstBusyX.count(last));
  EXPECT_LT(firstBusyX[first], firstBusyX[last]);
  // Released: the run is taken over and drawn instead of the overview.
  app.holdLoads(false);
  ASSERT_EQ(runScript(gui, app, {"frames 2"}), "");
  ASSERT_NE(app.run(), nullptr);
  EXPECT_TRUE(app.probes().overviewRows.empty());
}

// A run that failed with problems of every kind the verdicts name: a NaN (first in an
// activation), a killed rank that never completed its plan, a rank that timed out waiting
// for it.  Every one of them needs the details (the plan for fates and stuck actions, gradients
// and losses for the first NaN/Inf in causal order).
model::RunModel failedRunWithNaN() {
  SyntheticSpec spec = defaultSyntheticSpec();
  spec.nanIteration = 1;
  spec.nanMicrobatch = 0;
  model::RunModel m = makeSyntheticRun(spec);
  int killed = -1, up = -1;
  for (const auto& r : m.ranks) {
    if (r.module == "llm" && r.tp == 0 && r.pp == 1 && r.dp == 0) killed = r.rank;
    if (r.module == "llm" && r.tp == 0 && r.pp == 0 && r.dp == 0) up = r.rank;
  }
  const int64_t span = m.maxTimeNs - m.minTimeNs;
  std::vector<int64_t> cut(m.ranks.size(), span * 85 / 100);
  cut[static_cast<size_t>(killed)] = span * 80 / 100;
  endRunEarly(m, cut);
  m.info.status = events::RunStatus::Failed;
  m.info.statusReason = "rank " + std::to_string(killed) + " was killed";
  events::DiagnosisRecord k;
  k.rank = killed;
  k.kind = events::DiagnosisKind::RankKilled;
  k.message = "killed by signal 9";
  events::DiagnosisRecord t;
  t.rank = up;
  t.kind = events::DiagnosisKind::Timeout;
  t.waitsOnRank = killed;
  t.message = "waits for the gradient";
  m.diagnoses = {k, t};
  return m;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Two-phase loading: the run is interactive once its timeline is in, and until the details
// (plan, gradients, losses) are merged no verdict is shown anywhere: no problem buttons or
// NaN/Inf sentence in the banner, no fate in the grid map or on the timeline, and the panels
// that need the details say so.  holdDetails pins that state however fast the load is.
// Released, the details are merged and the verdicts are those of the whole run.
// Zoomed out over more iterations than the rows have pixels for (4 px each), neither the
// loading overview nor the timeline draws a line per iteration (they washed the rows' bubbles
// into one grey haze); zoomed in, the timeline draws one per iteration in view again.
TEST(AppTimeline, IterationLinesGiveWayWhenTooDenseAndReturnZoomedIn) {
  Fixture fx;
  HeadlessImGui gui;
  SyntheticSpec spec = defaultSyntheticSpec();
  spec.iterations = 400;  // ~1,200 px of rows: 3 px an iteration
  spec.gradients = false;
  const model::RunModel m = makeSyntheticRun(spec);
  const std::string dense = (fx.dir / "dense.db").string();
  storage::writeRunFile(m, dense);
  {
    App app;
    app.holdLoads(true);
    app.open(dense);
    for (int i = 0; i < 3; ++i) gui.frame(app);
    ASSERT_TRUE(app.overviewShown());
    EXPECT_EQ(app.probes().overviewIterationLines, 0);
  }
  App app;
  app.open(dense);
  ASSERT_EQ(runScript(gui, app, {"zoom-fit", "frames 2"}), "");
  ASSERT_NE(app.run(), nullptr);
  EXPECT_EQ(app.probes().timelineIterationLines, 0);
  // The first ~1/40 of the run: about 10 iterations across the rows.
  const double spanMs = static_cast<double>(m.maxTimeNs - m.minTimeNs) / 1e6;
  ASSERT_EQ(runScript(gui, app, {"zoom 0 " + std::to_string(spanMs / 40), "frames 2"}), "");
  EXPECT_GE(app.probes().timelineIterationLines, 5);
  EXPECT_LE(app.probes().timelineIterationLines, 20);
}

// A captured job whose first 80 % is start-up (rendezvous, boundary broadcasts: each rank's
// first action a long wait) opens on its schedule, from its first send on, not
// squeezed into the last fifth; zoom-fit still shows the whole run.  A recorded run of the same
// shape opens whole.
TEST(AppTimeline, ACapturedJobOpensOnItsScheduleNotItsSetup) {
  Fixture fx;
  HeadlessImGui gui;
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  const int64_t span = m.maxTimeNs - m.minTimeNs;
  for (auto& actions : m.actions)
    if (!actions.empty()) actions.front().startNs -= 4 * span;
  int64_t firstMessage = m.maxTimeNs;
  for (const auto& t : m.transfers)
    if (t.side == events::Side::Send) firstMessage = std::min(firstMessage, t.startNs);
  const int64_t start = m.minTimeNs - 4 * span, end = m.maxTimeNs;
  for (const bool captured : {true, false}) {
    SCOPED_TRACE(captured ? "captured" : "recorded");
    m.info.configText = captured ? std::string(events::kCapturedConfigLine) + "\n" : "seed = 1\n";
    m.info.origin = captured ? events::RunOrigin::Captured : events::RunOrigin::Engine;
    const std::string path = (fx.dir / (captured ? "captured.db" : "recorded.db")).string();
    storage::writeRunFile(m, path);
    App app;
    app.open(path);
    ASSERT_EQ(runScript(gui, app, {"frames 3"}), "");
    ASSERT_NE(app.run(), nullptr);
    ASSERT_EQ(app.run()->model.minTimeNs, start);
    const double viewStart = app.state().viewStart, viewEnd = app.state().viewEnd;
    EXPECT_GE(viewEnd, static_cast<double>(end));
    if (captured) {
      EXPECT_GT(viewStart, static_cast<double>(start + 3 * span)) << "the setup fills the view";
      EXPECT_LE(viewStart, static_cast<double>(firstMessage)) << "the first message is cut off";
    } else {
      EXPECT_LE(viewStart, static_cast<double>(start));
    }
    ASSERT_EQ(runScript(gui, app, {"zoom-fit", "frames 1"}), "");
    EXPECT_LE(app.state().viewStart, static_cast<double>(start));
  }
}

TEST(AppLaunch, NoVerdictIsShownBeforeTheDetailsAreIn) {
  Fixture fx;
  HeadlessImGui gui;
  const std::string path = (fx.dir / "failed.db").string();
  storage::writeRunFile(failedRunWithNaN(), path);
  const auto whole = openRun(path);  // the reference: both phases, one after the other
  ASSERT_TRUE(whole->detailsLoaded);
  ASSERT_GT(whole->problems.nonFiniteRecords, 0u);
  ASSERT_GE(whole->problems.firstStuckRank, 0);
  ASSERT_FALSE(whole->model.gradients.empty());

  App app;
  app.holdDetails(true);
  app.open(path);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!app.run() && std::chrono::steady_clock::now() < deadline) gui.frame(app);
  ASSERT_NE(app.run(), nullptr) << "the timeline did not load within 2 minutes";
  // The details are read meanwhile; give them time to finish, so that only the hold keeps
  // them out.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (const char* tab : {"tab grid", "tab plots", "tab find", "find-nonfinite"}) {
    std::string err;
    ASSERT_TRUE(app.runCommand(tab, &err)) << err;
    for (int i = 0; i < 3; ++i) gui.frame(app);
    const FrameProbes& p = app.probes();
    SCOPED_TRACE(tab);
    EXPECT_TRUE(app.detailsPending());
    EXPECT_FALSE(app.busy());  // held: script commands run on the interactive run
    EXPECT_FALSE(app.run()->detailsLoaded);
    EXPECT_TRUE(app.run()->model.gradients.empty());
    // The timeline is drawn (interactive), with no fate and no stuck action on it.
    EXPECT_FALSE(p.busyRows.empty() && p.items.empty());
    EXPECT_TRUE(p.stuck.empty());
    EXPECT_TRUE(p.waits.empty());
    // The banner: the recorded status and "loading details", no verdict.
    EXPECT_TRUE(p.bannerButtons.empty());
    EXPECT_NE(p.bannerText.find("loading details"), std::string::npos) << p.bannerText;
    EXPECT_EQ(p.bannerText.find("NaN/Inf;"), std::string::npos) << p.bannerText;
    EXPECT_EQ(p.bannerText.find("records hold"), std::string::npos) << p.bannerText;
    EXPECT_TRUE(p.cells.empty());  // grid cells in the colour of a fate
  }
  // The run stays usable: the replay moves, an action can be selected.
  std::string err;
  EXPECT_TRUE(app.runCommand("step 10", &err)) << err;
  EXPECT_EQ(app.state().step, 10);
  {
    ASSERT_TRUE(app.runCommand("tab plots", &err)) << err;
    for (int i = 0; i < 3; ++i) gui.frame(app);
    EXPECT_TRUE(contains(app.probes().detailsPendingPanels, "plots"));
    ASSERT_TRUE(app.runCommand("find-nonfinite", &err)) << err;
    for (int i = 0; i < 3; ++i) gui.frame(app);
    EXPECT_TRUE(contains(app.probes().detailsPendingPanels, "find"));
  }

  // Released: merged, judged, and the verdicts are the whole run's.
  app.holdDetails(false);
  ASSERT_EQ(runScript(gui, app, {"last", "tab grid", "frames 3"}), "");
  const LoadedRun* r = app.run();
  ASSERT_TRUE(r->detailsLoaded);
  EXPECT_FALSE(app.detailsPending());
  EXPECT_EQ(r->model.gradients.size(), whole->model.gradients.size());
  EXPECT_EQ(r->model.losses.size(), whole->model.losses.size());
  ASSERT_EQ(r->model.plan.size(), whole->model.plan.size());
  for (size_t k = 0; k < r->model.plan.size(); ++k)
    EXPECT_EQ(r->model.plan[k].size(), whole->model.plan[k].size());
  EXPECT_EQ(r->problems.nonFiniteRecords, whole->problems.nonFiniteRecords);
  EXPECT_EQ(r->problems.firstNonFinite.kind, whole->problems.firstNonFinite.kind);
  EXPECT_EQ(r->problems.firstNonFinite.index, whole->problems.firstNonFinite.index);
  EXPECT_EQ(r->problems.firstStuckRank, whole->problems.firstStuckRank);
  ASSERT_EQ(r->problems.ranks.size(), whole->problems.ranks.size());
  for (size_t k = 0; k < r->problems.ranks.size(); ++k) {
    EXPECT_EQ(r->problems.ranks[k].fate, whole->problems.ranks[k].fate) << "rank " << k;
    EXPECT_EQ(r->problems.ranks[k].stuckPlan, whole->problems.ranks[k].stuckPlan) << "rank " << k;
  }
  const FrameProbes& p = app.probes();
  EXPECT_TRUE(p.detailsPendingPanels.empty());
  EXPECT_TRUE(contains(p.bannerButtons, "First NaN/Inf"));
  EXPECT_NE(p.bannerText.find("records hold NaN/Inf"), std::string::npos) << p.bannerText;
  EXPECT_FALSE(p.cells.empty());  // the killed and stopped ranks' fates in the grid map
  EXPECT_FALSE(p.stuck.empty());  // and their stuck actions on the timeline
  // The user moved the replay while the details loaded: nothing was selected for them.
  EXPECT_EQ(app.state().selection.kind, Selection::Kind::None);
}

// Left alone while the details load, the viewer leads to the first problem once they are in,
// as when a run opened whole.
TEST(AppLaunch, TheFirstProblemIsShownWhenTheDetailsArrive) {
  Fixture fx;
  HeadlessImGui gui;
  const std::string path = (fx.dir / "failed.db").string();
  storage::writeRunFile(failedRunWithNaN(), path);
  const auto whole = openRun(path);
  App app;
  app.open(path);
  ASSERT_EQ(runScript(gui, app, {"frames 1"}), "");
  ASSERT_TRUE(app.run()->detailsLoaded);
  const NonFinite& n = whole->problems.firstNonFinite;
  ASSERT_NE(n.kind, NonFinite::Kind::None);
  EXPECT_NE(app.state().selection.kind, Selection::Kind::None);
  EXPECT_EQ(app.state().selection.index,
            whole->problems.corruptMessages > 0 ? whole->problems.firstCorruptTransfer : n.index);
}

// A process that holds `path` open (as a rank holds its shard) until it is killed; returns once
// it does.
pid_t holdOpen(const std::string& path) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    const int fd = ::open(path.c_str(), O_RDONLY);
    const char byte = fd >= 0 ? '1' : '0';
    if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = '0';
  const bool ok = ::read(ready[0], &byte, 1) == 1 && byte == '1';
  ::close(ready[0]);
  if (!ok) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

// A run being written (status running, a rank's shard held open by a live process): the
// banner and Run info say "LIVE" with the CLI's line, and never that the run completed.  The
// same file without a writer is a run that ended without its merge; a completed run whose kept
// shard a reader holds open is not live.
TEST(AppLaunch, ALiveRunSaysSoInItsBanner) {
  Fixture fx;
  HeadlessImGui gui;
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  const int world = m.info.worldSize;
  m.info.status = events::RunStatus::Running;
  const std::string live = (fx.dir / "live.db").string();
  storage::writeRunFile(m, live);
  std::ofstream(live + ".rank0.shard") << "being written";
  const pid_t writer = holdOpen(live + ".rank0.shard");
  ASSERT_GT(writer, 0);
  App app;
  app.open(live);
  const std::string err = runScript(gui, app, {"frames 3"});
  const std::string text = app.probes().bannerText;
  const std::string held = app.run() ? app.run()->live : "(no run)";
  // The writer ends: the same file is now a run nobody writes.
  App ended;
  ::kill(writer, SIGKILL);
  ::waitpid(writer, nullptr, 0);
  ended.open(live);
  ASSERT_EQ(err, "");
  ASSERT_EQ(runScript(gui, ended, {"frames 3"}), "");
  const std::string line = "live, 1 of " + std::to_string(world) + " ranks still writing";
  EXPECT_EQ(held.rfind(line, 0), 0u) << held;
  EXPECT_NE(text.find(line), std::string::npos) << text;
  EXPECT_NE(text.find("a snapshot"), std::string::npos) << text;
  EXPECT_EQ(ended.run()->live, "");
  EXPECT_EQ(ended.probes().bannerText.find("live,"), std::string::npos)
      << ended.probes().bannerText;
  // Completed, with a reader holding its kept shard open: not live.
  m.info.status = events::RunStatus::Completed;
  const std::string done = (fx.dir / "done.db").string();
  storage::writeRunFile(m, done);
  std::ofstream(done + ".rank0.shard") << "kept";
  const pid_t reader = holdOpen(done + ".rank0.shard");
  ASSERT_GT(reader, 0);
  App finished;
  finished.open(done);
  const std::string doneErr = runScript(gui, finished, {"frames 3"});
  ::kill(reader, SIGKILL);
  ::waitpid(reader, nullptr, 0);
  ASSERT_EQ(doneErr, "");
  EXPECT_EQ(finished.run()->live, "");
}

// A replica copy that differs from its first copy (a reduced gradient on the second DP
// replica with another checksum): the banner turns red and names it with the sentence `check`
// prints for its checksum_mismatch (analysis::describe), so the viewer and the CLI agree.
TEST(AppLaunch, AReplicaCopyThatDiffersIsNamedInTheBanner) {
  Fixture fx;
  HeadlessImGui gui;
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  auto copy = std::find_if(m.gradients.begin(), m.gradients.end(), [](const auto& g) {
    return g.phase == events::GradPhase::Reduced && g.dp == 1;
  });
  ASSERT_NE(copy, m.gradients.end());
  copy->checksum ^= 1;
  const std::string drifted = (fx.dir / "drifted.db").string();
  storage::writeRunFile(m, drifted);
  const model::RunModel read = storage::loadRun(drifted);
  const auto replicas = analysis::compareReplicas(read);
  ASSERT_EQ(replicas.mismatches.size(), 1u);
  App app;
  app.open(drifted);
  ASSERT_EQ(runScript(gui, app, {"frames 3"}), "");
  ASSERT_NE(app.run(), nullptr);
  EXPECT_EQ(app.run()->problems.replicaMismatches, 1u);
  const std::string& text = app.probes().bannerText;
  EXPECT_NE(text.find("1 replica copies differ from their first copy; first: " +
                      analysis::describe(read, replicas.mismatches.front())),
            std::string::npos)
      << text;
  // The correct run has none.
  App good;
  good.open(fx.a);
  ASSERT_EQ(runScript(gui, good, {"frames 3"}), "");
  EXPECT_EQ(good.run()->problems.replicaMismatches, 0u);
}

// A run file whose details cannot be read (a loss that is text) while its timeline can: the
// details read fails first, and the timeline is held until it has.  The viewer must name the
// file and the field, keep the timeline, and never move from the empty result (it crashed:
// the timeline's completion cleared the details' error).  Both orders, ten launches each.
// Details read before the timeline (a message-heavy run): each read wakes the event loop once
// when it ends, and the details' wake-up is spent while the timeline is still loading, so
// taking the timeline over wakes the loop again; otherwise it paused for its loading frame rate
// (up to 1 s) before it took the details.
TEST(AppLaunch, TakingTheTimelineWakesTheLoopWhenTheDetailsAreAlreadyIn) {
  Fixture fx;
  HeadlessImGui gui;
  std::atomic<int> wakes{0};
  App app;
  app.setWake([&wakes] { ++wakes; });
  app.holdLoads(true);  // both reads end; the timeline is not taken over
  app.open(fx.a);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (wakes < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(wakes, 2) << "the two reads did not end within a minute";
  gui.frame(app);
  EXPECT_EQ(wakes, 2);
  EXPECT_FALSE(app.run());
  app.holdLoads(false);
  gui.frame(app);  // takes the timeline over
  ASSERT_TRUE(app.run());
  EXPECT_EQ(wakes, 3);
  EXPECT_EQ(runScript(gui, app, {"frames 2"}), "");
  EXPECT_TRUE(app.run()->detailsLoaded);
}

TEST(AppLaunch, DetailsThatCannotBeReadAreAnErrorInEitherOrder) {
  Fixture fx;
  HeadlessImGui gui;
  const std::string bad = (fx.dir / "bad-loss.db").string();
  fs::copy_file(fx.a, bad);
  ASSERT_EQ(std::system(("sqlite3 '" + bad +
                         "' \"UPDATE losses SET loss = 'llm' WHERE rowid = (SELECT min(rowid) FROM "
                         "losses)\"")
                            .c_str()),
            0);
  for (const bool detailsFirst : {true, false}) {
    for (int launch = 0; launch < 10; ++launch) {
      App app;
      app.holdLoads(detailsFirst);  // the timeline waits until the details read has failed
      app.open(bad);
      if (detailsFirst) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        gui.frame(app);
        app.holdLoads(false);
      }
      ASSERT_EQ(runScript(gui, app, {"frames 3"}), "") << "launch " << launch;
      EXPECT_NE(app.bannerError().find("bad-loss.db"), std::string::npos) << app.bannerError();
      EXPECT_NE(app.bannerError().find("the details could not be read"), std::string::npos)
          << app.bannerError();
      EXPECT_NE(app.bannerError().find("losses"), std::string::npos) << app.bannerError();
    }
  }
}

TEST(AppLaunch, CompareWithoutAnOpenRunIsAnError) {
  Fixture fx;
  HeadlessImGui gui;
  App app;
  std::string err = runScript(gui, app, {"open-compare " + fx.b});
  EXPECT_NE(err.find("no run is open"), std::string::npos) << err;
}

// "frames N" takes a whole number 0..1000000; anything else fails the script with one line
// (std::atoi read "abc" as 0 and overflowed on huge numbers).
TEST(AppScript, FramesTakesAWholeNumberOrFails) {
  Fixture fx;
  HeadlessImGui gui;
  for (const std::string bad : {"frames abc", "frames", "frames -1", "frames 2.5", "frames 3x",
                                "frames 99999999999", "frames 1000001", "frames \x1b[2J"}) {
    App app;
    const std::string err = runScript(gui, app, {bad});
    EXPECT_NE(err.find("expected a number of frames from 0 to 1000000"), std::string::npos)
        << bad << ": " << err;
    EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
  }
  App app;
  EXPECT_EQ(runScript(gui, app, {"frames 3", "frames  0 "}), "");
}

// A damaged viewer.ini keeps each bad setting's default and says so in one line naming the
// file, key, value and what was expected; good values are taken.
TEST(AppSettings, BadValuesKeepTheDefaultWithOneLineEach) {
  Fixture fx;
  HeadlessImGui gui;
  const ViewerState defaults;
  {
    fs::create_directories(fx.dir / "config" / "stagescope");
    std::ofstream ini(fx.dir / "config" / "stagescope" / "viewer.ini");
    ini << "row_height=abc\nspeed=nan\ninspector_width=1e999\nbottom_height=12x\n"
           "tab=9999999999999\narrows=maybe\nplan=1\nrow_height=\x1b[2J\nunknown_key=1\n";
  }
  ::testing::internal::CaptureStderr();
  App app;
  const std::string err = ::testing::internal::GetCapturedStderr();
  const ViewerState& v = app.state();
  EXPECT_EQ(v.rowHeight, defaults.rowHeight);
  EXPECT_EQ(v.speed, defaults.speed);
  EXPECT_EQ(v.inspectorWidth, defaults.inspectorWidth);
  EXPECT_EQ(v.bottomHeight, defaults.bottomHeight);
  EXPECT_EQ(v.tab, defaults.tab);
  EXPECT_EQ(v.showArrows, defaults.showArrows);
  EXPECT_TRUE(v.showPlan);
  for (const char* line :
       {"row_height = 'abc': expected a number from 14 to 60; the default is used",
        "speed = 'nan': expected a number from 1 to 5000", "inspector_width = '1e999'",
        "bottom_height = '12x'", "tab = '9999999999999': expected a whole number from 0 to 4",
        "arrows = 'maybe': expected 0 or 1", "row_height = '\\x1B[2J'"}) {
    EXPECT_NE(err.find(line), std::string::npos) << line << " in\n" << err;
  }
  EXPECT_NE(err.find("viewer.ini: "), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 7) << err;
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;

  // Values the viewer itself saves are read back as they were.
  app.state().rowHeight = 31.5f;
  app.state().speed = 120;
  app.state().tab = static_cast<BottomTab>(3);
  app.saveSettings();
  ::testing::internal::CaptureStderr();
  App again;
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(again.state().rowHeight, 31.5f);
  EXPECT_EQ(again.state().speed, 120.0f);
  EXPECT_EQ(again.state().tab, static_cast<BottomTab>(3));
}

// Saving goes through a temporary file: a full disk (here RLIMIT_FSIZE in a child process)
// leaves the earlier viewer.ini byte for byte and no temporary file behind. Written in place,
// the file was truncated first and lost its settings.
TEST(AppSettings, AFullDiskKeepsTheEarlierSettings) {
  Fixture fx;
  HeadlessImGui gui;
  const fs::path dir = fx.dir / "config" / "stagescope";
  fs::create_directories(dir);
  const std::string before = "row_height=31.5\nspeed=120\ntab=3\n";
  std::ofstream(dir / "viewer.ini") << before;
  App app;
  app.state().rowHeight = 40.0f;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead
    const rlimit small{8, 8};
    ::setrlimit(RLIMIT_FSIZE, &small);
    app.saveSettings();
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  std::ifstream in(dir / "viewer.ini");
  const std::string after{std::istreambuf_iterator<char>(in), {}};
  EXPECT_EQ(after, before);
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename(), "viewer.ini") << "left behind: " << e.path();
  // With room to write, the new value replaces the file.
  app.saveSettings();
  App again;
  EXPECT_EQ(again.state().rowHeight, 40.0f);
}

// viewer.ini that is not a regular file: a FIFO blocked the viewer in open() until something
// wrote to it (and saving renamed a file over it); a link (here to /dev/zero) was followed and
// read without end.  Each is left as it is, with one line naming it, and the defaults used.
TEST(AppSettings, AFileThatIsNotRegularIsNeitherReadNorReplaced) {
  Fixture fx;
  HeadlessImGui gui;
  const fs::path dir = fx.dir / "config" / "stagescope";
  fs::create_directories(dir);
  const fs::path ini = dir / "viewer.ini";
  ASSERT_EQ(::mkfifo(ini.c_str(), 0600), 0);
  // Stands in for a writer after 5 s: opening the write end without blocking succeeds only
  // while a reader waits in open(), which the viewer must never do.
  std::atomic<bool> constructed{false}, readerWaited{false};
  std::thread unblock([&] {
    for (int i = 0; i < 50 && !constructed; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int fd = ::open(ini.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) {
      readerWaited = true;
      ::close(fd);
    }
  });
  ::testing::internal::CaptureStderr();
  {
    App app;
    constructed = true;
    unblock.join();
    EXPECT_EQ(app.state().rowHeight, ViewerState().rowHeight);
  }  // ~App saves the settings
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(readerWaited) << "the viewer waited in open() on a FIFO";
  EXPECT_NE(err.find("viewer.ini: is not a regular file"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(ini))) << "the FIFO was replaced";

  fs::remove(ini);
  fs::create_symlink("/dev/zero", ini);
  ::testing::internal::CaptureStderr();
  { App app; }
  const std::string linkErr = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(linkErr.find("viewer.ini: is a symbolic link"), std::string::npos) << linkErr;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(ini))) << "the link was replaced";
  EXPECT_EQ(fs::read_symlink(ini), "/dev/zero");
}

}  // namespace
}  // namespace stagescope::ui
