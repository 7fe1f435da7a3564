// Where the viewer keeps its settings (viewer.ini, imgui.ini) and which of those files it may
// read and replace.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace stagescope::ui
