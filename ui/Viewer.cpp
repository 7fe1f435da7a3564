// runViewer: the GLFW window, the OpenGL3 renderer, drag-and-drop, the script runner and
// screenshots (glReadPixels, then ui/ScreenshotFile).
#include "ui/Viewer.h"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>

#include "backends/imgui_impl_glfw.h"
#include "backends/imgui_impl_opengl3.h"
#include "core/events/Printable.h"
#include "ui/App.h"
#include "ui/ScreenshotFile.h"
#include "ui/ScriptRunner.h"
#include "ui/Settings.h"
#include "ui/Theme.h"
#include "ui/ViewerTiming.h"

namespace stagescope::ui {
namespace {

void onDrop(GLFWwindow* window, int count, const char** paths) {
  auto* app = static_cast<App*>(glfwGetWindowUserPointer(window));
  if (!app || count < 1) return;
  app->open(paths[0]);
  if (count > 1) app->openCompare(paths[1]);
}

// Writes the framebuffer as a PNG at `path` and, next to it, `path`.probes: where things were
// drawn, for the GUI tests.  Returns "" or the reason it could not.
std::string writeScreenshot(const std::string& path, int width, int height,
                            const FrameProbes& probes) {
  std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  std::vector<unsigned char> flipped(pixels.size());
  const size_t stride = static_cast<size_t>(width) * 4;
  for (int y = 0; y < height; ++y)
    std::copy_n(&pixels[static_cast<size_t>(height - 1 - y) * stride], stride,
                &flipped[static_cast<size_t>(y) * stride]);
  const std::string png = encodePng(flipped.data(), width, height);
  if (png.empty()) return path + ": could not encode the PNG";
  std::ostringstream out;
  auto rect = [&](const char* name, const ImVec4& r) {
    out << name << " " << r.x << " " << r.y << " " << r.z << " " << r.w << "\n";
  };
  rect("timeline", probes.timeline);
  rect("inspector", probes.inspector);
  rect("bottom", probes.bottom);
  rect("gridmap", probes.gridMap);
  rect("banner", probes.banner);
  auto rgb = [&](ImU32 c) {
    out << ((c >> IM_COL32_R_SHIFT) & 0xff) << " " << ((c >> IM_COL32_G_SHIFT) & 0xff) << " "
        << ((c >> IM_COL32_B_SHIFT) & 0xff);
  };
  out << "badge ";
  rgb(probes.bannerColour);
  out << "\n";
  for (int r : probes.stuckBreaks) out << "stuck-break " << r << "\n";
  for (const auto& m : probes.stuck) {
    out << "stuck " << m.rank << " " << m.rect.x << " " << m.rect.y << " " << m.rect.z << " "
        << m.rect.w << " ";
    rgb(m.colour);
    out << "\n";
  }
  for (const auto& m : probes.planSpans) {
    out << "plan-span " << m.rank << " " << m.rect.x << " " << m.rect.y << " " << m.rect.z << " "
        << m.rect.w << " ";
    rgb(m.colour);
    out << "\n";
  }
  for (const auto& m : probes.cells) {
    out << "cell " << m.rank << " " << m.rect.x << " " << m.rect.y << " " << m.rect.z << " "
        << m.rect.w << " ";
    rgb(m.colour);
    out << "\n";
  }
  for (const auto& h : probes.gridHeads) out << "grid-head " << h << "\n";
  for (const auto& m : probes.sharedCells) {
    out << "shared-cell " << m.rank << " " << m.rect.x << " " << m.rect.y << " " << m.rect.z << " "
        << m.rect.w << " ";
    rgb(m.colour);
    out << "\n";
  }
  for (const auto& it : probes.laneItems) {
    out << "lane-item " << it.rank << " " << it.lane << " " << it.moduleIndex << " " << it.rect.x
        << " " << it.rect.y << " " << it.rect.z << " " << it.rect.w << " ";
    rgb(it.colour);
    out << "\n";
  }
  for (const auto& l : probes.locals) {
    out << "local " << l.rank << " " << l.from.x << " " << l.from.y << " " << l.to.x << " "
        << l.to.y << " ";
    rgb(l.colour);
    out << "\n";
  }
  for (const auto& c : probes.collectives) {
    out << "collective " << c.instance << " " << c.rank << " " << c.rect.x << " " << c.rect.y << " "
        << c.rect.z << " " << c.rect.w << " ";
    rgb(c.colour);
    out << "\n";
  }
  for (const auto& b : probes.collectiveBands) {
    out << "collective-band " << b.instance << " " << b.from.x << " " << b.from.y << " " << b.to.x
        << " " << b.to.y << " ";
    rgb(b.colour);
    out << "\n";
  }
  for (const auto& r : probes.plotLabels)
    out << "plot-label " << r.x << " " << r.y << " " << r.z << " " << r.w << "\n";
  out << "gridmap-content " << probes.gridMapContent.x << " " << probes.gridMapContent.y << " "
      << probes.gridMapContent.z << " " << probes.gridMapContent.w << "\n";
  out << "banner-shown " << probes.bannerShown << "\n";
  for (const auto& c : probes.clippedText)
    out << "clipped-text " << c.contentRight << " " << c.clipRight << " " << c.top << " " << c.where
        << "\n";
  for (const auto& l : probes.rowLabels)
    out << "row-label " << l.rank << " " << l.textRight << " " << l.badgeLeft << "\n";
  for (const auto& b : probes.busyRows)
    out << "busy-row " << b.rank << " " << b.rect.x << " " << b.rect.y << " " << b.rect.z << " "
        << b.rect.w << "\n";
  for (const auto& w : probes.waits)
    out << "wait " << w.rank << " " << w.waitsOn << " " << w.from.x << " " << w.from.y << " "
        << w.to.x << " " << w.to.y << " " << (w.inCycle ? 1 : 0) << "\n";
  for (const auto& it : probes.items) {
    out << "item " << it.rank << " " << it.action << " " << it.rect.x << " " << it.rect.y << " "
        << it.rect.z << " " << it.rect.w << " " << ((it.colour >> IM_COL32_R_SHIFT) & 0xff) << " "
        << ((it.colour >> IM_COL32_G_SHIFT) & 0xff) << " "
        << ((it.colour >> IM_COL32_B_SHIFT) & 0xff) << "\n";
  }
  try {
    writeScreenshotFiles(path, png, out.str());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// "loading" (no run yet), "details" (interactive, the details still loading), or whether the
// view spans at least half the run ("out") or less ("in").
// While a run loads, frames come at most kLoadingFps a second and at most one per
// kLoadingDrawShare times the last frame's wall time (a frame that took 150 ms on a busy
// software renderer is followed by 1.35 s for the load): a loading frame only moves the
// progress bar and the overview, and the software renderer's threads and the X server took
// about a fifth of the viewer's CPU while a message-heavy 10^7-event run loaded.
// While the details load (the run is interactive), a frame without input only moves the
// progress bar, and drawing the whole timeline costs the software renderer far more than the
// overview did: kDetailsFps.
constexpr double kLoadingFps = 2;
constexpr double kDetailsFps = 1;
constexpr double kLoadingDrawShare = 9;

const char* zoomState(App& app) {
  const LoadedRun* run = app.run();
  if (!run) return "loading";
  if (!run->detailsLoaded) return "details";
  const double span = static_cast<double>(run->model.maxTimeNs - run->model.minTimeNs);
  return app.state().viewEnd - app.state().viewStart >= 0.5 * span ? "out" : "in";
}

// Creates the ImGui context with its settings file, the theme and the GLFW/OpenGL3 backends.
void setUpImGui(GLFWwindow* window) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  std::error_code ec;
  std::filesystem::create_directories(configDir(), ec);
  static std::string iniPath;
  iniPath = (std::filesystem::path(configDir()) / "imgui.ini").string();
  // ImGui reads and rewrites imgui.ini with plain fopen: only a regular file of its own.
  if (const std::string problem = settingsFileProblem(iniPath); problem.empty()) {
    io.IniFilename = iniPath.c_str();
  } else {
    io.IniFilename = nullptr;
    std::fprintf(stderr, "%s\n",
                 events::printableLine("viewer: " + iniPath + ": " + problem +
                                       "; the window layout is neither read nor saved")
                     .c_str());
  }
  theme::apply(io);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
}

void tearDown(GLFWwindow* window) {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
}

// The commands the script runner plays: the compare run first (it starts once the main run
// is open), the script, the screenshot, and a scripted session's "quit".
std::vector<std::string> viewerScript(const ViewerOptions& options, bool scripted) {
  std::vector<std::string> script;
  if (!options.other.empty()) script.push_back("open-compare " + options.other);
  script.insert(script.end(), options.script.begin(), options.script.end());
  if (!options.screenshot.empty()) script.push_back("screenshot " + options.screenshot);
  if (scripted) script.push_back("quit");
  return script;
}

// The event loop: one frame per turn, the script's commands between frames, screenshots a
// few frames after they were asked for.
class FrameLoop {
 public:
  FrameLoop(App& app, GLFWwindow* window, ViewerTiming& timing, const ViewerOptions& options,
            bool scripted)
      : app_(app),
        window_(window),
        timing_(timing),
        scripted_(scripted),
        runner_(viewerScript(options, scripted)) {}

  // Until the window closes or the app quits; returns the exit status so far (2: a script
  // command failed, 1: a screenshot could not be written).
  int run() {
    while (!glfwWindowShouldClose(window_) && !app_.quitRequested()) {
      waitForEvents();
      if (shotCountdown_ == 0 && !tickScript()) break;
      auto now = std::chrono::steady_clock::now();
      float dt = std::chrono::duration<float>(now - last_).count();
      last_ = now;
      frame(dt);
    }
    return rc_;
  }
  // CPU milliseconds of each frame drawn.
  std::vector<double>& frameMs() { return frameMs_; }

 private:
  // While a run loads, frames only show its overview and the progress: at most kLoadingFps of
  // them (input still wakes the loop at once), so that drawing (on a software renderer,
  // threads of its own) leaves the cores to the load.  The first frame (the overview: the
  // first useful one) is never held back.
  void waitForEvents() {
    if (app_.busy() && !frameMs_.empty())
      glfwWaitEventsTimeout(std::max(
          0.0,
          std::max(1.0 / (app_.detailsPending() ? kDetailsFps : kLoadingFps),
                   kLoadingDrawShare * lastFrameWall_) -
              std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count()));
    else
      glfwPollEvents();
  }
  // Runs the script's next command; false when it failed.
  bool tickScript() {
    std::string err;
    if (runner_.tick(app_, &err) == ScriptRunner::Tick::Failed) {
      std::fprintf(stderr, "%s\n", err.c_str());
      rc_ = 2;
      return false;
    }
    std::string shot = app_.takeScreenshotRequest();
    if (!shot.empty()) {
      pendingShot_ = shot;
      shotCountdown_ = 3;  // let the layout settle
    }
    return true;
  }
  // Builds, renders and shows one frame (and the screenshot that is due).
  void frame(float dt) {
    auto t0 = std::chrono::steady_clock::now();
    const double threadCpu0 = threadCpuMs();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    // A scripted session has no pointer: its screenshots never depend on where the X
    // server's pointer happens to be (no hover highlights or tooltips).
    if (scripted_) ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
    ImGui::NewFrame();
    app_.frame(dt);
    ImGui::Render();
    const double cpuMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double threadMs = threadCpuMs() - threadCpu0;
    frameMs_.push_back(cpuMs);
    int fbw = 0, fbh = 0;
    glfwGetFramebufferSize(window_, &fbw, &fbh);
    glViewport(0, 0, fbw, fbh);
    glClearColor(0.09f, 0.1f, 0.11f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (shotCountdown_ > 0 && --shotCountdown_ == 0) writePendingShot(fbw, fbh);
    glfwSwapBuffers(window_);
    lastFrameWall_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (timing_.enabled()) recordTiming(cpuMs, t0, threadMs);
  }
  void writePendingShot(int fbw, int fbh) {
    if (const std::string why = writeScreenshot(pendingShot_, fbw, fbh, app_.probes());
        !why.empty()) {
      std::fprintf(stderr, "error: %s\n", events::printableLine(why).c_str());
      rc_ = 1;
    } else {
      std::printf("screenshot %s (%dx%d)\n", pendingShot_.c_str(), fbw, fbh);
    }
    pendingShot_.clear();
  }
  void recordTiming(double cpuMs, std::chrono::steady_clock::time_point t0, double threadMs) {
    timing_.frame(
        cpuMs,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
        zoomState(app_), threadMs);
    timing_.phase("first-frame");
    if (app_.run() || app_.overviewShown()) timing_.phase("first-useful-frame");
    if (app_.run()) timing_.phase("interactive");
    if (app_.run() && app_.run()->detailsLoaded) timing_.phase("loaded");
  }

  App& app_;
  GLFWwindow* window_;
  ViewerTiming& timing_;
  const bool scripted_;
  ScriptRunner runner_;
  int rc_ = 0;
  std::string pendingShot_;
  int shotCountdown_ = 0;
  std::vector<double> frameMs_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  double lastFrameWall_ = 0;  // seconds: the previous frame, drawing and swap included
};

// A scripted session (CI, screenshots) that could not open a run says so and fails, after its
// screenshots were taken (they show the error banner).  Returns 1 then, else 0.
int reportLoadErrors(App& app) {
  int rc = 0;
  for (const std::string* error : {&app.loadError(), &app.compareError()}) {
    if (error->empty()) continue;
    std::fprintf(stderr, "error: %s\n", events::printableLine(*error).c_str());
    rc = 1;
  }
  return rc;
}

void printFrameTimes(std::vector<double>& frameMs) {
  std::sort(frameMs.begin(), frameMs.end());
  std::printf("frames %zu  median %.3f ms  p99 %.3f ms\n", frameMs.size(),
              frameMs[frameMs.size() / 2],
              frameMs[std::min(frameMs.size() - 1, frameMs.size() * 99 / 100)]);
}

}  // namespace

int runViewer(const ViewerOptions& options) {
  ViewerTiming timing;
  // Startup, phase by phase (STAGESCOPE_GUI_TIMING): "main" (the process loaded: libraries
  // and static initialisers), "glfw-init" (the X connection), "opened" (the overview read and
  // the load's thread started), "gl-context" (the window and its software GL context),
  // "window" (ImGui, fonts and the GL backend set up), then the first frames.
  timing.phase("main");
  // The run starts loading (overview, then the run on its background thread) before the
  // window exists: creating a window and its GL context takes about a second on a software
  // renderer, and the load uses that second.  App needs no ImGui context until frame().
  auto appOwner = std::make_unique<App>();
  // A finished load phase wakes the event loop (which waits for input between the few frames
  // drawn while loading).  GLFW is initialised before anything loads: glfwPostEmptyEvent needs
  // it, and a phase can finish before the window exists (then the event waits in the queue).
  // GLFW's errors before the window exists are kept and said once, in the line that says what
  // could not be done (no display: "X11: The DISPLAY environment variable is missing"); later
  // ones are printed as they come.
  static std::string setUpError;
  static bool windowOpen = false;
  glfwSetErrorCallback([](int code, const char* text) {
    if (windowOpen)
      std::fprintf(stderr, "%s\n",
                   events::printableLine("viewer: GLFW error " + std::to_string(code) + ": " +
                                         (text ? text : ""))
                       .c_str());
    else {
      setUpError = text ? text : "";
      while (!setUpError.empty() && setUpError.back() == ' ') setUpError.pop_back();
    }
  });
  if (!glfwInit()) {
    std::fprintf(
        stderr, "%s\n",
        events::printableLine("viewer: cannot open a window: " + setUpError +
                              " (the viewer needs a display: a desktop session, X forwarding, or "
                              "xvfb-run; check, compare and export need none)")
            .c_str());
    return 1;
  }
  timing.phase("glfw-init");
  appOwner->setWake([] { glfwPostEmptyEvent(); });
  appOwner->holdDetails(options.holdDetails);
  if (!options.run.empty()) appOwner->open(options.run);
  timing.phase("opened");
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  GLFWwindow* window =
      glfwCreateWindow(options.width, options.height, "stagescope", nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "%s\n",
                 events::printableLine("viewer: cannot create the window: " + setUpError +
                                       " (the viewer needs OpenGL 3.3)")
                     .c_str());
    appOwner.reset();  // ends the load (it wakes GLFW when done) before GLFW goes
    glfwTerminate();
    return 1;
  }
  windowOpen = true;
  glfwMakeContextCurrent(window);
  timing.phase("gl-context");
  const bool scripted = !options.script.empty() || !options.screenshot.empty();
  glfwSwapInterval(scripted || options.benchmark ? 0 : 1);
  setUpImGui(window);
  timing.phase("window");

  int rc = 0;
  {
    App& app = *appOwner;
    glfwSetWindowUserPointer(window, &app);
    glfwSetDropCallback(window, onDrop);
    FrameLoop loop(app, window, timing, options, scripted);
    rc = loop.run();
    if (scripted && rc == 0) rc = reportLoadErrors(app);
    timing.memory();
    if (options.benchmark && !loop.frameMs().empty()) printFrameTimes(loop.frameMs());
    app.saveSettings();
  }
  appOwner.reset();
  tearDown(window);
  return rc;
}

std::vector<std::string> screenshotPaths(const ViewerOptions& options) {
  std::vector<std::string> paths;
  if (!options.screenshot.empty()) paths.push_back(options.screenshot);
  for (const std::string& command : options.script) {
    std::istringstream in(command);
    std::string verb, path;
    in >> verb >> path;
    if (verb == "screenshot" && !path.empty()) paths.push_back(path);
  }
  return paths;
}

std::vector<std::string> openedPaths(const ViewerOptions& options) {
  std::vector<std::string> paths{options.run, options.other};
  for (const std::string& command : options.script) {
    std::istringstream in(command);
    std::string verb, path;
    in >> verb >> path;
    if ((verb == "open" || verb == "open-compare") && !path.empty()) paths.push_back(path);
  }
  return paths;
}

}  // namespace stagescope::ui
