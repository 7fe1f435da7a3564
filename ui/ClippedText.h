// What the viewer laid out wider than the space it was given, as ImGui measured it this frame:
// text cut off at a window's or a table column's right edge without saying so.  The GUI tests
// read it from a screenshot's ".probes" file ("clipped-text" lines) so that a panel whose
// numbers or sentences are cut at first glance fails a test, whatever the text is.
#pragma once

#include <string>
#include <vector>

namespace stagescope::ui {

struct ClippedText {
  std::string where;   // the window's name, or "<window name>|table <id> column <n>"
  float contentRight;  // screen x where the laid-out content ends (pixels)
  float clipRight;     // screen x where the window or column stops drawing
  float top;           // the window's or table's top edge (screen y)
};

// Every window and table column drawn in the frame just ended whose content extends past its
// clip edge by more than a pixel.  Windows and tables that scroll horizontally are left out
// (their content is reachable), and so are windows whose content is custom-drawn (`skip`:
// parts of window names, e.g. the timeline's canvas, whose blocks are cut at the view's edge
// on purpose).  Call after the frame's last End().
std::vector<ClippedText> findClippedText(const std::vector<std::string>& skip);

}  // namespace stagescope::ui
