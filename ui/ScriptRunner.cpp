#include "ui/ScriptRunner.h"

#include <charconv>
#include <optional>
#include <string>

#include "core/events/Printable.h"

#include "ui/App.h"

namespace stagescope::ui {

namespace {

constexpr int kMaxFrames = 1000000;

// "frames N": N a whole number 0..kMaxFrames, blanks around it allowed; anything else (a
// sign, a fraction, trailing text, overflow) is nullopt.
std::optional<int> framesOf(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  const size_t last = text.find_last_not_of(" \t");
  if (first == std::string::npos) return std::nullopt;
  int n = -1;
  const char* end = text.data() + last + 1;
  const auto [at, ec] = std::from_chars(text.data() + first, end, n);
  if (ec != std::errc() || at != end || n < 0 || n > kMaxFrames) return std::nullopt;
  return n;
}

}  // namespace

ScriptRunner::Tick ScriptRunner::tick(App& app, std::string* error) {
  if (waitFrames_ > 0) {
    --waitFrames_;
    return Tick::Waiting;
  }
  if (next_ >= commands_.size()) return Tick::Finished;
  if (app.busy()) return Tick::Waiting;
  const std::string& cmd = commands_[next_++];
  if (cmd == "frames" || cmd.rfind("frames ", 0) == 0) {
    const std::optional<int> n = framesOf(cmd.substr(6));
    if (!n) {
      if (error) {
        *error =
            events::printableLine("script: '" + cmd + "': expected a number of frames from 0 to " +
                                  std::to_string(kMaxFrames));
      }
      return Tick::Failed;
    }
    waitFrames_ = *n;
    return Tick::Ran;
  }
  return app.runCommand(cmd, error) ? Tick::Ran : Tick::Failed;
}

}  // namespace stagescope::ui
