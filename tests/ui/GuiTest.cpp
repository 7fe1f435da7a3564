// Runs the real stagescope-gui under Xvfb over a fixture run file with a script (open, step,
// select a transfer, open a compare run, jump to the first divergence), then checks the
// screenshots' pixels: timeline blocks have their module colours, the inspector shows content
// after the selection, the compare view shows differences.  Skips when xvfb-run is missing.
#include <gtest/gtest.h>
#include <stb/stb_image.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "storage/RunFileWriter.h"
#include "tests/support/SyntheticRun.h"

namespace stagescope::ui {
namespace {

namespace fs = std::filesystem;
using namespace stagescope::testing;

struct Image {
  int w = 0, h = 0;
  std::vector<unsigned char> px;
  bool load(const std::string& path) {
    int n = 0;
    unsigned char* data = stbi_load(path.c_str(), &w, &h, &n, 4);
    if (!data) return false;
    px.assign(data, data + static_cast<size_t>(w) * h * 4);
    stbi_image_free(data);
    return true;
  }
  const unsigned char* at(int x, int y) const { return &px[(static_cast<size_t>(y) * w + x) * 4]; }
};

struct Probes {
  std::map<std::string, std::array<float, 4>> regions;
  struct Item {
    int rank;
    float x0, y0, x1, y1;
    int r, g, b;
  };
  std::vector<Item> items, stuck, cells, sharedCells;
  std::vector<std::string> gridHeads;  // every grid-map cell's label
  struct LaneItem {
    int rank, lane, module;
    float x0, y0, x1, y1;
    int r, g, b;
  };
  std::vector<LaneItem> laneItems;
  struct Local {
    int rank;
    float x0, y0, x1, y1;
    int r, g, b;
  };
  std::vector<Local> locals;
  struct Wait {
    int rank, waitsOn;
    float x0, y0, x1, y1;
    int inCycle = -1;
  };
  std::vector<Wait> waits;
  struct BusyRow {
    int rank;
    float x0, y0, x1, y1;
  };
  std::vector<BusyRow> busyRows;
  struct RowLabel {
    int rank;
    float textRight, badgeLeft;
  };
  std::vector<RowLabel> rowLabels;
  // Text laid out wider than its window or table column: "where content-right clip-right".
  std::vector<std::string> clipped;
  std::vector<std::array<float, 4>> plotLabels;  // the plots' NaN/Inf marker labels
  std::string bannerShown;
  std::array<float, 4> gridMapContent{};  // where the map ends (x, y), its scroll range (x, y)
  int badge[3] = {-1, -1, -1};
  std::vector<int> stuckBreaks;  // ranks whose stuck action is drawn cut, with a break
  const Item* find(const std::vector<Item>& v, int rank) const {
    for (const auto& it : v)
      if (it.rank == rank) return &it;
    return nullptr;
  }
  bool load(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream s(line);
      std::string kind;
      s >> kind;
      if (kind == "grid-head") {
        std::string head;
        std::getline(s >> std::ws, head);
        gridHeads.push_back(head);
      } else if (kind == "item") {
        Item it{};
        long long action = 0;
        s >> it.rank >> action >> it.x0 >> it.y0 >> it.x1 >> it.y1 >> it.r >> it.g >> it.b;
        items.push_back(it);
      } else if (kind == "stuck" || kind == "cell" || kind == "shared-cell") {
        Item it{};
        s >> it.rank >> it.x0 >> it.y0 >> it.x1 >> it.y1 >> it.r >> it.g >> it.b;
        (kind == "stuck" ? stuck : kind == "cell" ? cells : sharedCells).push_back(it);
      } else if (kind == "lane-item") {
        LaneItem it{};
        s >> it.rank >> it.lane >> it.module >> it.x0 >> it.y0 >> it.x1 >> it.y1 >> it.r >> it.g >>
            it.b;
        laneItems.push_back(it);
      } else if (kind == "local") {
        Local l{};
        s >> l.rank >> l.x0 >> l.y0 >> l.x1 >> l.y1 >> l.r >> l.g >> l.b;
        locals.push_back(l);
      } else if (kind == "wait") {
        Wait w{};
        s >> w.rank >> w.waitsOn >> w.x0 >> w.y0 >> w.x1 >> w.y1 >> w.inCycle;
        waits.push_back(w);
      } else if (kind == "row-label") {
        RowLabel l{};
        s >> l.rank >> l.textRight >> l.badgeLeft;
        rowLabels.push_back(l);
      } else if (kind == "busy-row") {
        BusyRow b{};
        s >> b.rank >> b.x0 >> b.y0 >> b.x1 >> b.y1;
        busyRows.push_back(b);
      } else if (kind == "clipped-text") {
        float right = 0, clip = 0, top = 0;
        std::string where;
        s >> right >> clip >> top;
        std::getline(s >> std::ws, where);
        clipped.push_back(where + " ends at x " + std::to_string(right) + ", cut at " +
                          std::to_string(clip));
      } else if (kind == "plot-label") {
        std::array<float, 4> r{};
        s >> r[0] >> r[1] >> r[2] >> r[3];
        plotLabels.push_back(r);
      } else if (kind == "gridmap-content") {
        s >> gridMapContent[0] >> gridMapContent[1] >> gridMapContent[2] >> gridMapContent[3];
      } else if (kind == "banner-shown") {
        std::getline(s >> std::ws, bannerShown);
      } else if (kind == "stuck-break") {
        int r = -1;
        s >> r;
        stuckBreaks.push_back(r);
      } else if (kind == "badge") {
        s >> badge[0] >> badge[1] >> badge[2];
      } else {
        std::array<float, 4> r{};
        s >> r[0] >> r[1] >> r[2] >> r[3];
        regions[kind] = r;
      }
    }
    return !regions.empty();
  }
};

// Nothing on the screen is cut at a window's or a table column's edge without saying so: every
// panel's sentence wraps, every number's column fits it (ui/ClippedText.h; the timeline's
// canvas, which cuts blocks at the view's edge on purpose, is not measured).
void expectNoClippedText(const Probes& p, const std::string& shot) {
  for (const auto& c : p.clipped) ADD_FAILURE() << shot << ": text cut off: " << c;
}

// Share of pixels in a region that differ from the region's most common colour.
double nonBackground(const Image& img, std::array<float, 4> r) {
  std::map<uint32_t, size_t> counts;
  size_t total = 0;
  for (int y = static_cast<int>(r[1]) + 2; y < static_cast<int>(r[3]) - 2 && y < img.h; ++y)
    for (int x = static_cast<int>(r[0]) + 2; x < static_cast<int>(r[2]) - 2 && x < img.w; ++x) {
      const unsigned char* p = img.at(x, y);
      ++counts[(p[0] << 16) | (p[1] << 8) | p[2]];
      ++total;
    }
  size_t top = 0;
  for (const auto& [c, n] : counts) top = std::max(top, n);
  return total ? 1.0 - static_cast<double>(top) / static_cast<double>(total) : 0.0;
}

size_t countReddish(const Image& img, std::array<float, 4> r) {
  size_t n = 0;
  for (int y = static_cast<int>(r[1]); y < static_cast<int>(r[3]) && y < img.h; ++y)
    for (int x = static_cast<int>(r[0]); x < static_cast<int>(r[2]) && x < img.w; ++x) {
      const unsigned char* p = img.at(x, y);
      if (p[0] > 200 && p[1] < 130 && p[2] < 130) ++n;
    }
  return n;
}

// Pixels of a rectangle (inset by `inset`) within `tol` of colour (r, g, b), as a share.
double shareOfColour(const Image& img, float x0, float y0, float x1, float y1, int r, int g, int b,
                     int tol = 8, int inset = 0) {
  size_t n = 0, total = 0;
  for (int y = static_cast<int>(y0) + inset; y < static_cast<int>(y1) - inset && y < img.h; ++y)
    for (int x = static_cast<int>(x0) + inset; x < static_cast<int>(x1) - inset && x < img.w; ++x) {
      const unsigned char* p = img.at(x, y);
      ++total;
      if (std::abs(p[0] - r) <= tol && std::abs(p[1] - g) <= tol && std::abs(p[2] - b) <= tol) ++n;
    }
  return total ? static_cast<double>(n) / static_cast<double>(total) : 0.0;
}

// Whether the top edge of a rectangle is outlined in (r, g, b): the best of the rows around it.
double outlineShare(const Image& img, float x0, float y0, float x1, int r, int g, int b) {
  double best = 0;
  for (int dy = -2; dy <= 2; ++dy)
    best = std::max(best, shareOfColour(img, x0 + 4, y0 + dy, x1 - 4, y0 + dy + 1, r, g, b, 12));
  return best;
}

// The rank of `module` at grid position (tp, pp, dp), or -1.
int rankAt(const model::RunModel& m, const std::string& module, int tp, int pp, int dp) {
  for (const auto& r : m.ranks)
    if (r.module == module && r.tp == tp && r.pp == pp && r.dp == dp) return r.rank;
  return -1;
}

events::DiagnosisRecord record(int rank, const std::string& kind, int waitsOn,
                               const std::string& message) {
  events::DiagnosisRecord d;
  d.rank = rank;
  EXPECT_TRUE(events::parseDiagnosisKind(kind, &d.kind)) << kind;
  d.waitsOnRank = waitsOn;
  d.message = message;
  return d;
}

// Opens `run` in the real viewer under Xvfb, runs `script` and writes `shot`; returns the log
// (empty string and a failed assertion when the viewer exits non-zero).
std::string shoot(const fs::path& dir, const std::string& run,
                  const std::vector<std::string>& script, const std::string& shot,
                  const std::string& options = "") {
  std::ostringstream cmd;
  cmd << "XDG_CONFIG_HOME='" << (dir / "config").string()
      << "' xvfb-run -a -s '-screen 0 1600x1000x24' '" << STAGESCOPE_GUI_EXE << "' '" << run
      << "' --size 1600x1000 " << options;
  for (const auto& c : script) cmd << " --script '" << c << "'";
  cmd << " --screenshot '" << shot << "' > '" << shot << ".log' 2>&1";
  const int rc = std::system(cmd.str().c_str());
  std::ifstream log(shot + ".log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << text;
  return text;
}

// An interrupted run file whose merge missed one rank (its shard never merged): that rank has
// no row, so its grid cell has no rank number.  The cell says "r?" (hovering it, how to recover
// the records), never "r-1".
TEST(Gui, AGridCellNoRankRecordedIsUnnumbered) {
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run not installed";
  const fs::path dir = fs::path(STAGESCOPE_SCREENSHOT_DIR) / "unmerged";
  fs::remove_all(dir);
  fs::create_directories(dir / "config");
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  const int missing = rankAt(m, "llm", 0, 1, 0);
  ASSERT_GE(missing, 0);
  std::erase_if(m.ranks, [&](const events::RankInfo& r) { return r.rank == missing; });
  m.info.status = events::RunStatus::Running;
  const std::string run = (dir / "unmerged.db").string();
  storage::writeRunFile(m, run);
  const std::string shot = (dir / "unmerged.png").string();
  shoot(dir, run, {"frames 3"}, shot);
  Probes p;
  ASSERT_TRUE(p.load(shot + ".probes"));
  ASSERT_FALSE(p.gridHeads.empty());
  size_t unnumbered = 0;
  for (const auto& h : p.gridHeads) {
    EXPECT_EQ(h.rfind("r-", 0), std::string::npos) << h;
    unnumbered += h.rfind("r?", 0) == 0;
  }
  EXPECT_EQ(unnumbered, 1u);
}

// A run in which one llm rank was SIGKILLed mid-run: its neighbours timed out waiting on it,
// the launcher stopped the rest.  The viewer must say FAILED, mark the rank killed (never
// "finished") in the grid map and on the timeline, and draw the wait-for arrows to it.
TEST(Gui, KilledRankIsMarkedAndTheWaitsPointAtIt) {
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run not installed";
  const fs::path dir = fs::path(STAGESCOPE_SCREENSHOT_DIR) / "killed";
  fs::remove_all(dir);
  fs::create_directories(dir / "config");
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  const int killed = rankAt(m, "llm", 0, 1, 0), up = rankAt(m, "llm", 0, 0, 0),
            down = rankAt(m, "llm", 0, 2, 0);
  ASSERT_GE(killed, 0);
  const int64_t span = m.maxTimeNs - m.minTimeNs;
  std::vector<int64_t> cut(m.ranks.size(), span * 55 / 100);
  cut[killed] = span * 40 / 100;
  endRunEarly(m, cut);
  m.info.status = events::RunStatus::Failed;
  m.info.statusReason = "rank " + std::to_string(killed) + " was killed by signal 9 (Killed)";
  m.diagnoses.push_back(record(killed, "rank_killed", -1, "killed by signal 9 (Killed)"));
  m.diagnoses.push_back(record(up, "timeout", killed, "rank waits for the gradient"));
  m.diagnoses.push_back(record(down, "timeout", killed, "rank waits for the activation"));
  for (const auto& r : m.ranks)
    if (r.rank != killed && r.rank != up && r.rank != down)
      m.diagnoses.push_back(record(r.rank, "rank_stopped", -1, "stopped by the launcher"));
  const std::string run = (dir / "killed.db").string();
  storage::writeRunFile(m, run);
  const std::string shot = (dir / "killed.png").string();
  shoot(dir, run, {"frames 3"}, shot);

  Image img;
  Probes p;
  ASSERT_TRUE(img.load(shot));
  ASSERT_TRUE(p.load(shot + ".probes"));
  expectNoClippedText(p, shot);
  // The banner's badge is drawn, in the failure colour (red).
  ASSERT_GE(p.badge[0], 0);
  EXPECT_GT(p.badge[0], 180);
  EXPECT_LT(p.badge[1], 100);
  const auto banner = p.regions["banner"];
  EXPECT_GT(shareOfColour(img, banner[0] + 8, banner[1] + 5, banner[0] + 40, banner[3] - 5,
                          p.badge[0], p.badge[1], p.badge[2]),
            0.4);
  // The killed rank's grid cell is filled with the killed colour.
  const auto* cell = p.find(p.cells, killed);
  ASSERT_NE(cell, nullptr) << "the killed rank's grid cell does not show its fate";
  EXPECT_GT(
      shareOfColour(img, cell->x0, cell->y0, cell->x1, cell->y1, cell->r, cell->g, cell->b, 8, 2),
      0.5);
  EXPECT_GT(cell->r, 180);
  // Its stuck action on the timeline: outlined in the same colour.
  const auto* stuck = p.find(p.stuck, killed);
  ASSERT_NE(stuck, nullptr);
  EXPECT_GT(outlineShare(img, stuck->x0, stuck->y0, stuck->x1, stuck->r, stuck->g, stuck->b), 0.8);
  // The two waiting ranks' arrows end at the killed rank, and are drawn (red near the head).
  int toKilled = 0;
  for (const auto& w : p.waits) {
    if (w.waitsOn != killed) continue;
    ++toKilled;
    EXPECT_EQ(w.inCycle, 0);  // a wait on a rank that is gone: red, not a cycle
    EXPECT_GT(countReddish(img, {w.x1 - 12, w.y1 - 12, w.x1 + 12, w.y1 + 12}), 10u);
  }
  EXPECT_EQ(toKilled, 2);

  // The same run while its details (the plan) load: the timeline and the grid map are drawn,
  // and no fate anywhere — the banner's badge is the recorded status in grey, the killed
  // rank's cell is not red, no stuck action, no wait-for arrow.
  const std::string pendingShot = (dir / "killed-pending.png").string();
  shoot(dir, run, {"frames 3"}, pendingShot, "--hold-details");
  Image pending;
  Probes q;
  ASSERT_TRUE(pending.load(pendingShot));
  ASSERT_TRUE(q.load(pendingShot + ".probes"));
  EXPECT_FALSE(q.busyRows.empty() && q.items.empty());  // the timeline is drawn
  EXPECT_TRUE(q.cells.empty());
  EXPECT_TRUE(q.stuck.empty());
  EXPECT_TRUE(q.waits.empty());
  EXPECT_LT(std::abs(q.badge[0] - q.badge[2]), 30);  // grey, not the failure red
  EXPECT_EQ(countReddish(pending, q.regions["banner"]), 0u);
  EXPECT_LT(shareOfColour(pending, cell->x0, cell->y0, cell->x1, cell->y1, cell->r, cell->g,
                          cell->b, 8, 2),
            0.05);
  EXPECT_GT(nonBackground(pending, q.regions["gridmap"]), 0.02);  // the grid map is drawn
}

// A hang: two llm ranks wait on each other (a cycle).  The banner says HUNG (orange), both
// stuck actions are drawn and the wait-for arrows between them are visible.
TEST(Gui, HangHighlightsTheStuckActionsAndTheirWaits) {
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run not installed";
  const fs::path dir = fs::path(STAGESCOPE_SCREENSHOT_DIR) / "hang";
  fs::remove_all(dir);
  fs::create_directories(dir / "config");
  model::RunModel m = makeSyntheticRun(defaultSyntheticSpec());
  const int a = rankAt(m, "llm", 0, 0, 0), b = rankAt(m, "llm", 0, 1, 0);
  const int64_t span = m.maxTimeNs - m.minTimeNs;
  endRunEarly(m, std::vector<int64_t>(m.ranks.size(), span / 2));
  m.info.status = events::RunStatus::Hung;
  m.info.statusReason = "ranks timed out; cycle rank " + std::to_string(a) + " -> rank " +
                        std::to_string(b) + " -> rank " + std::to_string(a);
  m.diagnoses.push_back(record(a, "timeout", b, "waits for the gradient"));
  m.diagnoses.push_back(record(b, "timeout", a, "waits for the activation"));
  // They gave up 3 s after the last record: far longer than the schedule drawn before it.
  for (auto& d : m.diagnoses) d.timeNs = m.maxTimeNs + 3'000'000'000LL;
  const std::string run = (dir / "hang.db").string();
  storage::writeRunFile(m, run);
  const std::string shot = (dir / "hang.png").string();
  shoot(dir, run, {"frames 3"}, shot);

  Image img;
  Probes p;
  ASSERT_TRUE(img.load(shot));
  ASSERT_TRUE(p.load(shot + ".probes"));
  expectNoClippedText(p, shot);
  EXPECT_GT(p.badge[0], 180);  // orange: hung
  EXPECT_GT(p.badge[1], 100);
  EXPECT_LT(p.badge[2], 80);
  for (int r : {a, b}) {
    // A 3 s wait after a schedule of milliseconds is drawn cut, and the cut is shown (it was
    // drawn as a few milliseconds, unmarked).
    EXPECT_NE(std::find(p.stuckBreaks.begin(), p.stuckBreaks.end(), r), p.stuckBreaks.end())
        << "rank " << r << "'s 3 s wait drawn without a break";
    const auto* stuck = p.find(p.stuck, r);
    ASSERT_NE(stuck, nullptr) << "rank " << r;
    EXPECT_GT(outlineShare(img, stuck->x0, stuck->y0, stuck->x1, stuck->r, stuck->g, stuck->b), 0.8)
        << "rank " << r;
  }
  // No fate badge covers its row's label ("vision  tp0 pp0 dp1  r2" beside "unfinished" lost
  // its coordinates under the badge): every label ends before its badge begins.
  ASSERT_EQ(p.rowLabels.size(), m.ranks.size());
  for (const auto& l : p.rowLabels) EXPECT_LE(l.textRight, l.badgeLeft - 2) << "rank " << l.rank;
  // The two waits are a cycle: both arrows in the cycle colour (theme::kCycle), not the red of
  // a wait on a rank that is gone.
  ASSERT_EQ(p.waits.size(), 2u);
  for (const auto& w : p.waits) {
    EXPECT_EQ(w.inCycle, 1) << w.rank << " -> " << w.waitsOn;
    EXPECT_GT(shareOfColour(img, w.x1 - 12, w.y1 - 12, w.x1 + 12, w.y1 + 12, 236, 96, 210, 12),
              0.04)
        << w.rank << " -> " << w.waitsOn;
    // (a blended edge pixel or two may read as red; a red arrow head is ~100)
    EXPECT_LE(countReddish(img, {w.x1 - 12, w.y1 - 12, w.x1 + 12, w.y1 + 12}), 3u)
        << w.rank << " -> " << w.waitsOn;
  }
}

// Colocation: rank 1 holds vision's last stage, audio and llm stage 0.  Its timeline row is
// split into one lane per module, each lane's blocks in that module's colour; the grid map
// shows the rank in every module's grid with a mark in the other modules' colours; the local
// hand-offs between its modules are drawn as loops on its row.
TEST(Gui, ColocatedRankIsASplitRowSharedInTheGridWithLocalLoops) {
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run not installed";
  const fs::path dir = fs::path(STAGESCOPE_SCREENSHOT_DIR) / "colocated";
  fs::remove_all(dir);
  fs::create_directories(dir / "config");
  const std::string run = (dir / "colocated.db").string();
  storage::writeRunFile(makeSyntheticRun(colocatedSyntheticSpec()), run);
  const std::string shot = (dir / "colocated.png").string();
  shoot(dir, run, {"frames 3", "zoom-fit", "frames 2"}, shot);

  Image img;
  Probes p;
  ASSERT_TRUE(img.load(shot));
  ASSERT_TRUE(p.load(shot + ".probes"));
  expectNoClippedText(p, shot);
  // Forward/backward blocks in at least two lanes of rank 1's row, each in its lane's module
  // colour, the lanes' colours distinct, and the lanes stacked (one below the other).
  std::map<int, const Probes::LaneItem*> byLane;
  for (const auto& it : p.laneItems) {
    ASSERT_EQ(it.rank, 1) << "only rank 1 is shared";
    EXPECT_GT(shareOfColour(img, it.x0, it.y0, it.x1, it.y1, it.r, it.g, it.b, 8, 2), 0.5)
        << "lane " << it.lane << " block at " << it.x0 << "," << it.y0;
    byLane.emplace(it.lane, &it);
  }
  ASSERT_GE(byLane.size(), 2u) << p.laneItems.size() << " lane blocks";
  const auto* first = byLane.begin()->second;
  const auto* last = byLane.rbegin()->second;
  EXPECT_NE(first->module, last->module);
  EXPECT_NE(std::make_tuple(first->r, first->g, first->b),
            std::make_tuple(last->r, last->g, last->b));
  EXPECT_GE(last->y0, first->y1 - 1);  // a later lane lies below an earlier one
  // The grid map: rank 1's cells carry marks in the other modules' colours (3 cells x 2).
  size_t marks = 0;
  for (const auto& c : p.sharedCells) {
    EXPECT_EQ(c.rank, 1);
    EXPECT_GT(shareOfColour(img, c.x0, c.y0, c.x1, c.y1, c.r, c.g, c.b, 8, 1), 0.6);
    ++marks;
  }
  EXPECT_EQ(marks, 6u);
  // Local hand-offs: loops on rank 1's row, drawn near their arrow head.
  ASSERT_FALSE(p.locals.empty());
  for (const auto& l : p.locals) {
    EXPECT_EQ(l.rank, 1);
    EXPECT_GT(shareOfColour(img, l.x1 - 2, l.y1 - 8, l.x1 + 14, l.y1 + 8, l.r, l.g, l.b, 40), 0.05)
        << "loop ending at " << l.x1 << "," << l.y1;
  }
}

TEST(Gui, ScriptedSessionScreenshotsShowTheRun) {
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run not installed";
  const fs::path dir = fs::path(STAGESCOPE_SCREENSHOT_DIR) / "session";
  fs::remove_all(dir);
  fs::create_directories(dir / "config");
  std::string run, other;
  {
    SyntheticSpec spec = defaultSyntheticSpec();
    spec.corruptIteration = 0;
    spec.corruptMicrobatch = 3;
    spec.deviationRank = 5;
    run = (dir / "fixture.db").string();
    storage::writeRunFile(makeSyntheticRun(spec), run);
    SyntheticSpec div = alternateLayoutSpec();
    div.divergeIteration = 1;
    div.divergeMicrobatch = 2;
    other = (dir / "other.db").string();
    storage::writeRunFile(makeSyntheticRun(div), other);
  }
  const std::string shotStep = (dir / "step.png").string();
  const std::string shotTransfer = (dir / "transfer.png").string();
  const std::string shotCompare = (dir / "compare.png").string();
  std::ostringstream cmd;
  cmd << "XDG_CONFIG_HOME='" << (dir / "config").string()
      << "' xvfb-run -a -s '-screen 0 1600x1000x24' '" << STAGESCOPE_GUI_EXE << "' '" << run
      << "' --size 1600x1000"
      // The fixture has a corrupted message: the viewer opens zoomed onto it; fit first.
      << " --script 'frames 3' --script zoom-fit --script next-iter --script 'step 300' --script "
         "'frames 2'"
      << " --script 'screenshot " << shotStep << "'"
      << " --script 'select-transfer 0' --script 'frames 2' --script 'screenshot " << shotTransfer
      << "'"
      << " --script 'open-compare " << other << "' --script 'frames 2' --script jump-divergence"
      << " --script 'frames 2' --script 'screenshot " << shotCompare << "'"
      << " > '" << (dir / "gui.log").string() << "' 2>&1";
  int rc = std::system(cmd.str().c_str());
  std::ifstream log(dir / "gui.log");
  std::string logText((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  ASSERT_EQ(rc, 0) << logText;

  // 1. After stepping: timeline blocks carry their module colours.
  Image step;
  Probes probes;
  ASSERT_TRUE(step.load(shotStep)) << logText;
  ASSERT_TRUE(probes.load(shotStep + ".probes"));
  expectNoClippedText(probes, shotStep);
  ASSERT_GE(probes.items.size(), 4u);
  size_t matched = 0;
  std::set<int> colours;
  for (const auto& it : probes.items) {
    int x = static_cast<int>(it.x0) + 2, y = static_cast<int>(it.y0) + 2;
    ASSERT_LT(x, step.w);
    ASSERT_LT(y, step.h);
    const unsigned char* p = step.at(x, y);
    if (std::abs(p[0] - it.r) <= 6 && std::abs(p[1] - it.g) <= 6 && std::abs(p[2] - it.b) <= 6)
      ++matched;
    colours.insert((it.r << 16) | (it.g << 8) | it.b);
  }
  EXPECT_GE(matched * 10, probes.items.size() * 8) << matched << " of " << probes.items.size();
  EXPECT_GE(colours.size(), 2u);  // at least two modules or forward and backward shades
  EXPECT_GT(nonBackground(step, probes.regions["timeline"]), 0.2);
  EXPECT_GT(nonBackground(step, probes.regions["gridmap"]), 0.05);

  // 2. A selected transfer fills the inspector.
  Image transfer;
  Probes tprobes;
  ASSERT_TRUE(transfer.load(shotTransfer));
  ASSERT_TRUE(tprobes.load(shotTransfer + ".probes"));
  expectNoClippedText(tprobes, shotTransfer);
  double before = nonBackground(step, probes.regions["inspector"]);
  double after = nonBackground(transfer, tprobes.regions["inspector"]);
  EXPECT_GT(after, 0.04);
  EXPECT_GT(after, before);

  // 3. Compare shows differences (red) in the bottom panel.
  Image compare;
  Probes cprobes;
  ASSERT_TRUE(compare.load(shotCompare));
  ASSERT_TRUE(cprobes.load(shotCompare + ".probes"));
  expectNoClippedText(cprobes, shotCompare);
  EXPECT_GT(countReddish(compare, cprobes.regions["bottom"]), 30u);
  // 4. The jump shows run B's side of the item in the inspector too, below run A's record (it
  // showed run A's record alone): the inspector holds more than the transfer's own rows.
  EXPECT_GT(nonBackground(compare, cprobes.regions["inspector"]),
            nonBackground(transfer, tprobes.regions["inspector"]) + 0.03)
      << nonBackground(compare, cprobes.regions["inspector"]) << " vs "
      << nonBackground(transfer, tprobes.regions["inspector"]);
}

// A run with a NaN loss (iteration 1, microbatch 2) against a clean one: jumping to the first
// divergence and opening the plots, nothing on the screen is cut off (the compare panel's
// numbers, its evidence sentence, the inspector's lines), and the plots' NaN markers are
// labelled without one label running into another (it read "NaNaN").
TEST(Gui, NaNCompareAndPlotsAreReadableAtFirstGlance) {
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run not installed";
  const fs::path dir = fs::path(STAGESCOPE_SCREENSHOT_DIR) / "nan_compare";
  fs::remove_all(dir);
  fs::create_directories(dir / "config");
  SyntheticSpec nanSpec = defaultSyntheticSpec();
  nanSpec.nanIteration = 1;
  nanSpec.nanMicrobatch = 2;
  const std::string run = (dir / "nan.db").string(), clean = (dir / "clean.db").string();
  storage::writeRunFile(makeSyntheticRun(nanSpec), run);
  storage::writeRunFile(makeSyntheticRun(defaultSyntheticSpec()), clean);
  const std::string cmpShot = (dir / "compare.png").string();
  const std::string plotShot = (dir / "plots.png").string();
  shoot(
      dir, run,
      {"frames 3", "jump-divergence", "frames 2", "screenshot " + cmpShot, "tab plots", "frames 2"},
      plotShot, "'" + clean + "'");

  Probes c, p;
  ASSERT_TRUE(c.load(cmpShot + ".probes"));
  ASSERT_TRUE(p.load(plotShot + ".probes"));
  expectNoClippedText(c, cmpShot);
  expectNoClippedText(p, plotShot);
  // The banner leads with the most important fact: the two runs diverged (it showed run A's
  // green COMPLETED while DIVERGED sat in a bottom tab), and a run with NaN is never green.
  EXPECT_EQ(c.bannerShown.rfind("compared with the other run: ", 0), 0u) << c.bannerShown;
  const bool green = c.badge[0] == 110 && c.badge[1] == 200 && c.badge[2] == 120;
  EXPECT_FALSE(green) << "the badge of a diverged NaN run is green";
  ASSERT_FALSE(p.plotLabels.empty()) << "the NaN losses are marked on the loss plot";
  for (size_t i = 0; i < p.plotLabels.size(); ++i)
    for (size_t j = i + 1; j < p.plotLabels.size(); ++j) {
      const auto &a = p.plotLabels[i], &b = p.plotLabels[j];
      const bool overlap = a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
      EXPECT_FALSE(overlap) << "labels at x " << a[0] << ".." << a[2] << " and " << b[0] << ".."
                            << b[2];
    }
}

// A grid taller and wider than the bottom panel (vision dp4 and llm tp2 x pp4 x dp4: 40 ranks)
// is reachable: the panel scrolls over all of it (the map ran off the panel's bottom, its last
// rows out of reach).
TEST(Gui, ALargeGridMapScrollsInsteadOfRunningOffThePanel) {
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run not installed";
  const fs::path dir = fs::path(STAGESCOPE_SCREENSHOT_DIR) / "large_grid";
  fs::remove_all(dir);
  fs::create_directories(dir / "config");
  SyntheticSpec spec;
  spec.modules = {{"vision", "encoder", 2, 1, 4, 0, 2}, {"llm", "llm", 2, 4, 4, 8, 8}};
  spec.microbatches = 4;
  spec.gradients = false;
  const std::string run = (dir / "large.db").string();
  storage::writeRunFile(makeSyntheticRun(spec), run);
  const std::string shot = (dir / "grid.png").string();
  shoot(dir, run, {"frames 3", "tab grid", "frames 3"}, shot);
  Probes p;
  ASSERT_TRUE(p.load(shot + ".probes"));
  expectNoClippedText(p, shot);
  const auto panel = p.regions["gridmap"];
  const auto& c = p.gridMapContent;
  ASSERT_GT(c[1], panel[3]) << "the layout is meant to be taller than the panel";
  EXPECT_LE(c[1] - panel[3], c[3] + 2) << "rows below the panel's edge cannot be scrolled to";
  EXPECT_LE(c[0] - panel[2], std::max(0.0f, c[2]) + 2) << "columns past the edge cannot be reached";
}

// Zoomed out over ~10^5 events (far more actions than pixels per row), each rank's row is its
// computing share per pixel column: the screenshot shows, inside the run, bright (computing)
// and dark (bubble: waiting in a receive) columns on every llm row, and the pipeline's warm-up
// (the last stage starts computing after the first), not one solid bar per rank.
TEST(Gui, ZoomedOutTimelineShowsBubblesPerRank) {
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run not installed";
  const fs::path dir = fs::path(STAGESCOPE_SCREENSHOT_DIR) / "zoomed_out";
  fs::remove_all(dir);
  fs::create_directories(dir / "config");
  const model::RunModel m = makeSyntheticRun(benchmarkSpec(100000));
  const std::string run = (dir / "run.db").string();
  storage::writeRunFile(m, run);
  const std::string shot = (dir / "zoomed_out.png").string();
  const std::string log = shoot(dir, run, {"frames 2", "zoom-fit", "frames 2"}, shot);
  Image img;
  Probes probes;
  ASSERT_TRUE(img.load(shot)) << log;
  ASSERT_TRUE(probes.load(shot + ".probes"));
  ASSERT_GE(probes.busyRows.size(), 10u) << "rows drawn as a busy share per pixel column";
  // Brightness of the heat colour: blue runs from 34 (idle) to 255 (always computing).
  const auto column = [&](const Probes::BusyRow& b, int x) {
    return static_cast<int>(img.at(x, static_cast<int>((b.y0 + b.y1) / 2))[2]);
  };
  const int llmPp0 = rankAt(m, "llm", 0, 0, 0), llmLast = rankAt(m, "llm", 0, 3, 0);
  std::map<int, int> firstBright;
  int llmRows = 0;
  for (const auto& b : probes.busyRows) {
    const auto& ri = *std::find_if(m.ranks.begin(), m.ranks.end(),
                                   [&](const events::RankInfo& r) { return r.rank == b.rank; });
    size_t bright = 0, dark = 0, total = 0;
    for (int x = static_cast<int>(b.x0) + 1; x < static_cast<int>(b.x1) - 1; ++x) {
      const int blue = column(b, x);
      if (blue >= 180 && !firstBright.count(b.rank)) firstBright[b.rank] = x;
      ++total;
      bright += blue >= 180;
      dark += blue <= 110;
    }
    if (ri.module != "llm") continue;
    ++llmRows;
    EXPECT_GT(bright * 20, total) << "rank " << b.rank << ": no computing columns";
    EXPECT_GT(dark * 20, total) << "rank " << b.rank << ": no bubble columns";
  }
  EXPECT_EQ(llmRows, 16);
  ASSERT_TRUE(firstBright.count(llmPp0) && firstBright.count(llmLast));
  EXPECT_LT(firstBright[llmPp0], firstBright[llmLast]);
}

TEST(Gui, BadFileShowsErrorInsteadOfCrashing) {
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run not installed";
  const fs::path dir = fs::path(STAGESCOPE_SCREENSHOT_DIR) / "bad";
  fs::remove_all(dir);
  fs::create_directories(dir / "config");
  const fs::path bad = dir / "not_a_run.db";
  { std::ofstream(bad) << "this is not a run file"; }
  const std::string shot = (dir / "error.png").string();
  std::ostringstream cmd;
  cmd << "XDG_CONFIG_HOME='" << (dir / "config").string()
      << "' xvfb-run -a -s '-screen 0 1200x800x24' '" << STAGESCOPE_GUI_EXE << "' '" << bad.string()
      << "' --size 1200x800 --script 'frames 3'"
      << " --screenshot '" << shot << "' > '" << (dir / "gui.log").string() << "' 2>&1";
  // A scripted session that could not open its run still takes its screenshot (the banner),
  // then says why on one line and exits 1, so that a CI job using it fails.
  const int status = std::system(cmd.str().c_str());
  std::ifstream logFile(dir / "gui.log");
  const std::string log((std::istreambuf_iterator<char>(logFile)),
                        std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 1) << log;
  EXPECT_NE(log.find("error: " + bad.string()), std::string::npos) << log;
  Image img;
  Probes probes;
  ASSERT_TRUE(img.load(shot));
  ASSERT_TRUE(probes.load(shot + ".probes"));
  EXPECT_GT(countReddish(img, probes.regions["timeline"]), 20u);  // the red error banner
}

}  // namespace
}  // namespace stagescope::ui
