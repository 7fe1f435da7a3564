// The viewer's entry point, shared by `stagescope-gui` and the `stagescope gui` subcommand.
#pragma once

#include <string>
#include <vector>

namespace stagescope::ui {

struct ViewerOptions {
  std::string run, other;  // run file paths
  int width = 1600, height = 1000;
  std::string screenshot;  // PNG path written after the script
  // Scripted commands, one per entry, run in order once per frame; a command waits until
  // loading has finished.  scriptCommandHelp() lists them.
  std::vector<std::string> script;
  bool benchmark = false;  // print per-frame CPU time (median, p99) on exit
  // For tests: the run's details are never taken over, and the script runs once the run is
  // interactive (App::holdDetails).
  bool holdDetails = false;
};

// The script commands with their arguments, one per line (for --help and the docs).
const char* scriptCommandHelp();

// The PNG paths the viewer will write (--screenshot and the script's `screenshot PATH`), and the
// run files it will open (RUN, OTHER and the script's `open`/`open-compare`): the host checks
// the first against the output policy, with the second as inputs, before the window opens.
std::vector<std::string> screenshotPaths(const ViewerOptions& options);
std::vector<std::string> openedPaths(const ViewerOptions& options);

// Opens a window and runs until it is closed (or the script ends with a screenshot/quit).
// Returns 0 on success; 1 when the window could not be created, a screenshot could not be
// written, or (scripted) a run could not be opened; 2 when a script command failed (the message
// goes to stderr).
int runViewer(const ViewerOptions& options);

}  // namespace stagescope::ui
