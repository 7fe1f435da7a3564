// bench_gui: writes a synthetic run of ~1,000,000 events to a real run file, opens it and
// reports load time and per-frame CPU time (NewFrame..Render)
// fully zoomed out, zoomed in and while playing.  Headless: ImGui without a renderer.
// `bench_gui N --write PATH` only writes the run file (to measure `stagescope gui PATH`);
// `bench_gui --open PATH` measures an existing run file.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "storage/RunFileWriter.h"
#include "tests/support/SyntheticRun.h"
#include "ui/App.h"
#include "ui/Theme.h"

using namespace stagescope::ui;
using namespace stagescope::testing;
using Clock = std::chrono::steady_clock;

namespace {
struct Stats {
  double median, p99;
};
Stats measure(App& app, int frames, bool hover) {
  std::vector<double> ms;
  ImGuiIO& io = ImGui::GetIO();
  for (int i = 0; i < frames; ++i) {
    io.DeltaTime = 1.0f / 60;
    io.MousePos =
        hover ? ImVec2(400.0f + (i % 50) * 10.0f, 200.0f + (i % 7) * 12.0f) : ImVec2(-1, -1);
    auto t0 = Clock::now();
    ImGui::NewFrame();
    app.frame(io.DeltaTime);
    ImGui::Render();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 99 / 100)]};
}
}  // namespace

int benchMain(int argc, char** argv) {
  // bench_gui --open PATH: measures an existing run file (nothing is generated or written).
  const bool openOnly = argc > 2 && std::string(argv[1]) == "--open";
  std::string path;
  if (openOnly) {
    path = argv[2];
  } else {
    size_t target = 1000000;
    if (argc > 1) {
      char* end = nullptr;
      target = std::strtoul(argv[1], &end, 10);
      if (end == argv[1] || *end != '\0' || target == 0)
        throw std::invalid_argument(std::string("events '") + argv[1] +
                                    "': expected a positive count (bench_gui [N [--write PATH]] "
                                    "| --open PATH)");
    }
    auto tg = Clock::now();
    stagescope::model::RunModel model = makeSyntheticRun(benchmarkSpec(target));
    size_t events = countEvents(model);
    std::printf("synthetic run: %zu events (%zu ranks, %d iterations) generated in %.2f s\n",
                events, model.ranks.size(), model.info.iterations,
                std::chrono::duration<double>(Clock::now() - tg).count());
    // bench_gui N --write PATH: only writes the run file (for measuring `stagescope gui PATH`).
    const bool writeOnly = argc > 3 && std::string(argv[2]) == "--write";
    path = writeOnly
               ? std::string(argv[3])
               : (std::filesystem::temp_directory_path() / "stagescope_bench_gui.db").string();
    if (!writeOnly) std::filesystem::remove(path);  // bench_gui's own file from an earlier run
    auto tw = Clock::now();
    stagescope::storage::writeRunFile(model, path);
    std::printf("wrote %s in %.2f s\n", path.c_str(),
                std::chrono::duration<double>(Clock::now() - tw).count());
    model = {};
    if (writeOnly) return 0;
  }

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  // As the viewer's OpenGL 3.3 renderer declares: draw lists may exceed 64K vertices (split by
  // VtxOffset).  Without it a dense timeline frame trips ImGui's 16-bit index assertion here,
  // which the real viewer never does.
  io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;
  io.DisplaySize = ImVec2(1600, 1000);
  theme::apply(io);
  unsigned char* px = nullptr;
  int w = 0, h = 0;
  io.Fonts->GetTexDataAsRGBA32(&px, &w, &h);
  {
    App app;
    auto t0 = Clock::now();
    app.open(path);
    double interactive = -1;  // the timeline is in (the first phase)
    while (!app.run() || app.busy()) {
      if (app.run() && interactive < 0)
        interactive = std::chrono::duration<double>(Clock::now() - t0).count();
      ImGui::NewFrame();
      app.frame(1.0f / 60);
      ImGui::Render();
      if (!app.busy() && !app.run() && !app.loadError().empty()) {
        std::fprintf(stderr, "load failed: %s\n", app.loadError().c_str());
        return 1;
      }
      // As the real viewer: a few frames per second while loading (ui/Viewer.cpp).
      if (app.busy()) std::this_thread::sleep_for(std::chrono::milliseconds(125));
    }
    double load = std::chrono::duration<double>(Clock::now() - t0).count();
    const LoadedRun* run = app.run();
    if (!run->detailsLoaded) {
      std::fprintf(stderr, "details failed: %s\n", app.loadError().c_str());
      return 1;
    }
    if (interactive < 0) interactive = load;
    std::printf(
        "load: %.3f s until fully loaded, interactive at %.3f s (timeline: read %.3f s + index "
        "%.3f s; details %.3f s)  target < 2 s\n",
        load, interactive, run->loadSeconds, run->indexSeconds, run->detailsSeconds);
    std::string err;
    app.runCommand("zoom-fit", &err);
    Stats out = measure(app, 300, true);
    std::printf("frame, zoomed out: median %.3f ms  p99 %.3f ms\n", out.median, out.p99);
    app.runCommand("zoom 500 520", &err);
    Stats in = measure(app, 300, true);
    std::printf("frame, zoomed in (20 ms): median %.3f ms  p99 %.3f ms\n", in.median, in.p99);
    app.runCommand("zoom-fit", &err);
    app.runCommand("follow", &err);
    app.state().speed = 2000;
    app.runCommand("play", &err);
    Stats play = measure(app, 300, false);
    std::printf("frame, playing (zoomed out, 2000 steps/s): median %.3f ms  p99 %.3f ms\n",
                play.median, play.p99);
    app.runCommand("zoom 500 520", &err);
    app.runCommand("play", &err);
    Stats playIn = measure(app, 300, false);
    std::printf("frame, playing (zoomed in): median %.3f ms  p99 %.3f ms   target < 10 ms\n",
                playIn.median, playIn.p99);
  }
  ImGui::DestroyContext();
  return 0;
}

// One line and exit status 2 for what it cannot do (an existing --write file, a count that is
// not a number, a run file it cannot read), never an uncaught exception's abort.
int main(int argc, char** argv) {
  try {
    return benchMain(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gui: error: %s\n", e.what());
    return 2;
  }
}
