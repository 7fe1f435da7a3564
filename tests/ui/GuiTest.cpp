// Runs the real stagescope-gui under Xvfb over a fixture run file with a script (open, step,
// select a transfer, open a compare run, jump to the first divergence), then checks the
// screenshots' pixels: timeline blocks have their module colours, the inspector shows content
// after the selection, the compare view shows differences.  Skips when xvfb-run is missing.
#include <gtest/gtest.h>
#include <stb/stb_image.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

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
  std::vector<Item> items;
  bool load(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream s(line);
      std::string kind;
      s >> kind;
      if (kind == "item") {
        Item it{};
        long long action = 0;
        s >> it.rank >> action >> it.x0 >> it.y0 >> it.x1 >> it.y1 >> it.r >> it.g >> it.b;
        items.push_back(it);
      } else {
        std::array<float, 4> r{};
        s >> r[0] >> r[1] >> r[2] >> r[3];
        regions[kind] = r;
      }
    }
    return !regions.empty();
  }
};

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

TEST(Gui, ScriptedSessionScreenshotsShowTheRun) {
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run not installed";
  const fs::path dir = STAGESCOPE_SCREENSHOT_DIR;
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
      << " --script 'frames 3' --script next-iter --script 'step 300' --script 'frames 2'"
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
  double before = nonBackground(step, probes.regions["inspector"]);
  double after = nonBackground(transfer, tprobes.regions["inspector"]);
  EXPECT_GT(after, 0.04);
  EXPECT_GT(after, before);

  // 3. Compare shows differences (red) in the bottom panel.
  Image compare;
  Probes cprobes;
  ASSERT_TRUE(compare.load(shotCompare));
  ASSERT_TRUE(cprobes.load(shotCompare + ".probes"));
  EXPECT_GT(countReddish(compare, cprobes.regions["bottom"]), 30u);
}

TEST(Gui, BadFileShowsErrorInsteadOfCrashing) {
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xvfb-run not installed";
  const fs::path dir = fs::path(STAGESCOPE_SCREENSHOT_DIR) / "bad";
  fs::create_directories(dir / "config");
  const fs::path bad = dir / "not_a_run.db";
  { std::ofstream(bad) << "this is not a run file"; }
  const std::string shot = (dir / "error.png").string();
  std::ostringstream cmd;
  cmd << "XDG_CONFIG_HOME='" << (dir / "config").string()
      << "' xvfb-run -a -s '-screen 0 1200x800x24' '" << STAGESCOPE_GUI_EXE << "' '" << bad.string()
      << "' --size 1200x800 --script 'frames 3'"
      << " --screenshot '" << shot << "' > '" << (dir / "gui.log").string() << "' 2>&1";
  ASSERT_EQ(std::system(cmd.str().c_str()), 0);
  Image img;
  Probes probes;
  ASSERT_TRUE(img.load(shot));
  ASSERT_TRUE(probes.load(shot + ".probes"));
  EXPECT_GT(countReddish(img, probes.regions["timeline"]), 20u);  // the red error banner
}

}  // namespace
}  // namespace stagescope::ui
