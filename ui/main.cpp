// stagescope-gui [RUN [OTHER]] [--screenshot PNG] [--script CMD]... [--size WxH] [--benchmark]
#include <cstdio>
#include <cstring>
#include <string>

#include "core/events/Printable.h"
#include "storage/OutputPolicy.h"
#include "ui/Viewer.h"

int main(int argc, char** argv) {
  stagescope::ui::ViewerOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "stagescope-gui: %s needs a value\n", name);
        std::exit(64);
      }
      return argv[++i];
    };
    if (a == "--screenshot")
      o.screenshot = value("--screenshot");
    else if (a == "--script")
      o.script.push_back(value("--script"));
    else if (a == "--size") {
      std::string v = value("--size");
      if (std::sscanf(v.c_str(), "%dx%d", &o.width, &o.height) != 2) {
        std::fprintf(stderr, "stagescope-gui: --size %s: expected WIDTHxHEIGHT\n", v.c_str());
        return 64;
      }
    } else if (a == "--benchmark")
      o.benchmark = true;
    else if (a == "--hold-details")  // tests: the state while the details load, pinned
      o.holdDetails = true;
    else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: stagescope-gui [RUN [OTHER]] [--screenshot PNG] [--script CMD]... "
          "[--size WxH] [--benchmark]\nRUN, OTHER: run files (.db); OTHER is compared with "
          "RUN\n\n%s",
          stagescope::ui::scriptCommandHelp());
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "stagescope-gui: unknown option %s\n", a.c_str());
      return 64;
    } else if (o.run.empty())
      o.run = a;
    else if (o.other.empty())
      o.other = a;
    else {
      std::fprintf(stderr, "stagescope-gui: at most two runs\n");
      return 64;
    }
  }
  // Screenshots follow stagescope's output policy (docs/commands.md "Output files"), checked
  // before the window opens: a refused path changes nothing.  Exit codes as `stagescope gui`.
  try {
    stagescope::storage::claimScreenshotOutputs("--screenshot", stagescope::ui::screenshotPaths(o),
                                                stagescope::ui::openedPaths(o));
  } catch (const stagescope::storage::OutputRefused& e) {
    std::fprintf(stderr, "error: %s\n", stagescope::events::printableLine(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", stagescope::events::printableLine(e.what()).c_str());
    return 1;
  }
  return stagescope::ui::runViewer(o);
}
