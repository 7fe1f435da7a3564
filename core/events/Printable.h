// Text from outside (paths, config values, file contents) made safe to print in a one-line
// message: it can neither break the line nor drive the terminal.
#pragma once

#include <string>
#include <string_view>

namespace stagescope::events {

// `text` with every control character (C0, DEL, the C1 range U+0080..U+009F) and every byte
// that is not part of valid UTF-8 written as \xNN; printable UTF-8 (any language) is kept.
std::string printableLine(std::string_view text);

// The longest value (in bytes of `text`) an error line quotes whole.
inline constexpr size_t kMaxShownBytes = 200;

// A value from outside (a --set item, a file name, a command word) as an error line quotes it:
// printableLine(text), and when `text` is longer than `maxBytes`, its first 3/4 and last 1/4 of
// `maxBytes` (cut at UTF-8 boundaries) around "…", followed by " (N bytes)" - a 120 kB value is
// never echoed whole, and a long path still shows its file name.  Every message that echoes
// such a value calls this (a whole message from a library that quotes a value, CLI11's, with a
// larger `maxBytes`).
std::string shownValue(std::string_view text, size_t maxBytes = kMaxShownBytes);

}  // namespace stagescope::events
