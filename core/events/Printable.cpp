#include "core/events/Printable.h"

#include <cstdio>

namespace stagescope::events {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 when it is not one
// (overlong forms and surrogates included).
size_t utf8Length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80           ? 1
                   : (c >> 5) == 0x6  ? 2
                   : (c >> 4) == 0xE  ? 3
                   : (c >> 3) == 0x1E ? 4
                                      : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  const auto c1 = static_cast<unsigned char>(s[i + (n > 1 ? 1 : 0)]);
  if (n == 2 && c < 0xC2) return 0;                                 // overlong
  if (n == 3 && c == 0xE0 && c1 < 0xA0) return 0;                   // overlong
  if (n == 3 && c == 0xED && c1 >= 0xA0) return 0;                  // surrogate
  if (n == 4 && c == 0xF0 && c1 < 0x90) return 0;                   // overlong
  if (n == 4 && (c > 0xF4 || (c == 0xF4 && c1 >= 0x90))) return 0;  // beyond U+10FFFF
  return n;
}

}  // namespace

std::string printableLine(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = utf8Length(s, i);
    const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0;
    if (n == 0 || c < 0x20 || c == 0x7F || c1) {
      const size_t bytes = c1 ? 2 : 1;
      for (size_t k = 0; k < bytes; ++k) {
        char esc[8];
        std::snprintf(esc, sizeof esc, "\\x%02X", static_cast<unsigned char>(s[i + k]));
        out += esc;
      }
      i += bytes;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string shownValue(std::string_view s, size_t maxBytes) {
  if (s.size() <= maxBytes) return printableLine(s);
  const auto continuation = [&](size_t i) {
    return (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
  };
  size_t head = maxBytes * 3 / 4;
  while (head > 0 && continuation(head)) --head;  // never half a character
  size_t tail = s.size() - maxBytes / 4;
  while (tail < s.size() && continuation(tail)) ++tail;
  return printableLine(s.substr(0, head)) + "\xE2\x80\xA6" + printableLine(s.substr(tail)) + " (" +
         std::to_string(s.size()) + " bytes)";
}

}  // namespace stagescope::events
