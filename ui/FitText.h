// Text shortened to a width in pixels (the current ImGui font), visibly: a cut ends, or breaks
// in the middle, with "...", so a shortened name or sentence never reads as a whole one.
#pragma once

#include <string>

namespace stagescope::ui {

// `text` if it fits `width`; else its longest prefix that fits with "..." after it.
std::string elideEnd(const std::string& text, float width);

// `text` if it fits `width`; else its beginning and its end around "..." (a parameter name's
// module and its leaf both stay readable).
std::string elideMiddle(const std::string& text, float width);

}  // namespace stagescope::ui
