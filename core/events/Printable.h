// Text from outside (paths, config values, file contents) made safe to print in a one-line
// message: it can neither break the line nor drive the terminal.
#pragma once

#include <string>
#include <string_view>

namespace stagescope::events {

// `text` with every control character (C0, DEL, the C1 range U+0080..U+009F) and every byte
// that is not part of valid UTF-8 written as \xNN; printable UTF-8 (any language) is kept.
std::string printableLine(std::string_view text);

}  // namespace stagescope::events
