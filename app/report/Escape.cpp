#include "app/report/Escape.h"

#include <cstdio>

namespace stagescope::report {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// A continuation byte (10xxxxxx) within [lo, hi] (RFC 3629 narrows the second byte's range
// after E0, ED, F0 and F4).
bool continuation(std::string_view text, size_t i, unsigned char lo = 0x80,
                  unsigned char hi = 0xBF) {
  if (i >= text.size()) return false;
  const auto c = static_cast<unsigned char>(text[i]);
  return c >= lo && c <= hi;
}

// Bytes of the well-formed UTF-8 sequence that starts at text[i] (1-4), 0 when the bytes
// there are not one (a continuation byte, an overlong form, a surrogate, above U+10FFFF,
// truncated).  i < text.size().
size_t utf8SequenceLength(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return continuation(text, i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80;  // E0: no overlong forms
    const unsigned char hi = c == 0xED ? 0x9F : 0xBF;  // ED: no surrogates
    return continuation(text, i + 1, lo, hi) && continuation(text, i + 2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80;  // F0: no overlong forms
    const unsigned char hi = c == 0xF4 ? 0x8F : 0xBF;  // F4: nothing above U+10FFFF
    return continuation(text, i + 1, lo, hi) && continuation(text, i + 2) &&
                   continuation(text, i + 3)
               ? 4
               : 0;
  }
  return 0;  // a continuation byte alone, C0/C1 (overlong), F5-FF
}

// Appends the byte at text[i] (and what follows it, when it starts a well-formed multi-byte
// sequence) or U+FFFD; returns the bytes consumed.
size_t appendUtf8(std::string& out, std::string_view text, size_t i) {
  const size_t n = utf8SequenceLength(text, i);
  if (n == 0) {
    out += kReplacement;
    return 1;
  }
  out.append(text.substr(i, n));
  return n;
}

}  // namespace

void appendJsonEscaped(std::string& out, std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    // The run of bytes that need nothing (printable ASCII but '"' and '\\'), appended at once.
    size_t plain = i;
    while (plain < text.size()) {
      const auto p = static_cast<unsigned char>(text[plain]);
      if (p < 0x20 || p >= 0x80 || p == '"' || p == '\\') break;
      ++plain;
    }
    out.append(text.substr(i, plain - i));
    i = plain;
    if (i == text.size()) break;
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      i += appendUtf8(out, text, i);
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
}

std::string jsonEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  appendJsonEscaped(out, text);
  return out;
}

std::string xmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      // U+FFFE and U+FFFF are well-formed UTF-8 but not XML 1.0 characters.
      if (text.substr(i, 3) == "\xEF\xBF\xBE" || text.substr(i, 3) == "\xEF\xBF\xBF") {
        out += '?';
        i += 3;
        continue;
      }
      i += appendUtf8(out, text, i);
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') {
          out += '?';  // not representable in XML 1.0
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  return out;
}

}  // namespace stagescope::report
