// Runs the viewer's script (the --script commands of `stagescope gui`) against an App, one
// command per frame.  A command runs only when the App is idle: no run or compare run is being
// loaded and every finished load has been taken over by App::frame, so a command never sees
// a half-opened run.  ImGui-free (the App is driven by the caller's frame loop).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace stagescope::ui {

class App;

class ScriptRunner {
 public:
  explicit ScriptRunner(std::vector<std::string> commands) : commands_(std::move(commands)) {}

  enum class Tick { Waiting, Ran, Finished, Failed };
  // Call once per frame before App::frame.  Runs at most one command; "frames N" waits N
  // frames.  Failed sets *error to one line naming the command.
  Tick tick(App& app, std::string* error);
  bool finished() const { return next_ >= commands_.size() && waitFrames_ == 0; }

 private:
  std::vector<std::string> commands_;
  size_t next_ = 0;
  int waitFrames_ = 0;
};

}  // namespace stagescope::ui
