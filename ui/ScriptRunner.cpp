#include "ui/ScriptRunner.h"

#include <charconv>
#include <optional>
#include <string>

#include "core/events/Printable.h"

#include "ui/App.h"
#include "ui/Viewer.h"

namespace stagescope::ui {

const char* scriptCommandHelp() {
  return "script commands (--script CMD, repeatable; each waits until loading has finished):\n"
         "  frames N                 draw N frames before the next command\n"
         "  open PATH                open a run file\n"
         "  open-compare PATH        open a second run and align it with the open run\n"
         "  step N | next-mb | next-iter | first | last   move the replay\n"
         "  play | pause             replay playback\n"
         "  zoom-fit | zoom A B      timeline range (A, B in ms from the run's start)\n"
         "  plan | follow            planned-schedule overlay, follow the replay\n"
         "  select-action RANK I     select action I of RANK (and zoom to it)\n"
         "  select-transfer I | select-gradient I   select a record by index\n"
         "  select-collective I      select collective instance I (captured runs; order:\n"
         "                           iteration, group, members, number) and zoom to it\n"
         "  select-mismatch          select the first transfer whose checksums differ\n"
         "  select-local [N]         select the N-th (default 0) local hand-off (colocated "
         "modules)\n"
         "  jump-nonfinite           select the causally first NaN/Inf record\n"
         "  jump-divergence          select the first divergence from the compare run\n"
         "  jump-stuck               select the stuck operation of the root rank (a killed rank\n"
         "                           first) and explain it in the inspector\n"
         "  find | find-mismatch | find-nonfinite   open Find (with that filter)\n"
         "  tab grid|plots|compare|find|info        show a bottom tab\n"
         "  screenshot PATH          write a PNG of the window (and PATH.probes)\n"
         "  quit                     close the viewer\n";
}

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
