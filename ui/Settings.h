// The viewer's settings: where it keeps them (viewer.ini, imgui.ini), which of those files it
// may read and replace, and the view settings that outlive a session (viewer.ini).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ui/ViewerState.h"

namespace stagescope::ui {

// Settings file location: $XDG_CONFIG_HOME/stagescope or ~/.config/stagescope.
std::string configDir();
// Why the viewer's own settings file `path` (viewer.ini, imgui.ini) may not be read and
// replaced ("" when it may: missing, or a regular file of at most kMaxSettingsBytes).  A FIFO
// would block the viewer on open, a device such as /dev/zero would never end, and a symbolic
// link or another kind of file is not the viewer's to replace (docs/commands.md "Output files",
// "The viewer's settings").
constexpr uintmax_t kMaxSettingsBytes = 1 << 20;
std::string settingsFileProblem(const std::string& path);

// The view settings kept in viewer.ini: row height, toggles, speed, panel sizes, the tab, the
// recent runs.
class ViewerSettings {
 public:
  // Reads viewer.ini into `view`; a value that is not what its key takes keeps the default
  // and prints one line.  A viewer.ini that is not the viewer's to replace is left alone (then
  // save() does nothing).
  void load(ViewerState& view);
  // Replaces viewer.ini (through a temporary file); silent when it cannot.
  void save(const ViewerState& view) const;

 private:
  bool unsaved_ = false;  // viewer.ini is not a regular file: never replaced
};

// Puts `path` first in `recent` (at most 10, no repeats).
void addRecent(std::vector<std::string>& recent, const std::string& path);

}  // namespace stagescope::ui
