// The report writers' escaping (app/report/Escape.h) always yields valid UTF-8: a run file's
// texts are untrusted, and one bad byte in a module or parameter name used to make the whole
// Chrome trace unreadable to a strict JSON parser (Python's json, Perfetto).  The oracle is
// nlohmann::json, which validates UTF-8 on its own (parse and dump both throw on a bad
// sequence), not this project's decoder.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/report/Escape.h"

namespace stagescope::report {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";  // U+FFFD

// True when `text` is valid UTF-8 by nlohmann's own check.
bool validUtf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();  // strict: throws type_error 316 on invalid UTF-8
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// The JSON string jsonEscape makes of `text`, parsed back by nlohmann.
std::string roundTrip(const std::string& text) {
  return nlohmann::json::parse("\"" + jsonEscape(text) + "\"").get<std::string>();
}

TEST(Escape, IllFormedUtf8BecomesReplacementCharactersOnePerByte) {
  struct Case {
    std::string in, out;
  };
  const std::vector<Case> cases = {
      {"a\xFF"
       "b",
       "a" + kFffd + "b"},                                  // never a UTF-8 byte
      {"\xC0\xAF", kFffd + kFffd},                          // overlong '/'
      {"\xE0\x80\xAF", kFffd + kFffd + kFffd},              // overlong, 3 bytes
      {"\xED\xA0\x80", kFffd + kFffd + kFffd},              // a surrogate (U+D800)
      {"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},  // above U+10FFFF
      {"x\xE2\x82", "x" + kFffd + kFffd},                   // truncated at the end
      {"\x80"
       "z",
       kFffd + "z"},  // a continuation byte alone
      {"\xE2\x82\xAC \xC3\xA9 \xF0\x9F\x98\x80", "\xE2\x82\xAC \xC3\xA9 \xF0\x9F\x98\x80"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(jsonEscape(c.in), c.out);
    EXPECT_EQ(xmlEscape(c.in), c.out);
    EXPECT_EQ(roundTrip(c.in), c.out);
  }
}

TEST(Escape, JsonEscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(jsonEscape("a\"b\\c\n\t\x01"), "a\\\"b\\\\c\\n\\t\\u0001");
  EXPECT_EQ(roundTrip("a\"b\\c\n\t\x01"), "a\"b\\c\n\t\x01");
  std::string appended = "[";
  appendJsonEscaped(appended, "x\"");
  EXPECT_EQ(appended, "[x\\\"");
}

TEST(Escape, XmlLeavesNoCharacterXmlForbids) {
  EXPECT_EQ(xmlEscape("<a & 'b'>\x01"), "&lt;a &amp; &#39;b&#39;&gt;?");
  EXPECT_EQ(xmlEscape("\xEF\xBF\xBE\xEF\xBF\xBF"), "??");  // U+FFFE, U+FFFF
}

// Random bytes: the output is always valid UTF-8 and parses; random valid UTF-8 (code points
// encoded by nlohmann's own writer) passes through unchanged.
TEST(Escape, RandomBytesGiveValidUtf8AndValidTextIsKept) {
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<int> byte(0, 255), length(0, 24);
  for (int n = 0; n < 3000; ++n) {
    std::string in(static_cast<size_t>(length(rng)), '\0');
    for (char& c : in) c = static_cast<char>(byte(rng));
    ASSERT_TRUE(validUtf8(jsonEscape(in))) << n;
    ASSERT_TRUE(validUtf8(xmlEscape(in))) << n;
    ASSERT_NO_THROW(roundTrip(in)) << n;
  }
  std::uniform_int_distribution<uint32_t> point(0x20, 0x10FFFF);
  for (int n = 0; n < 3000; ++n) {
    std::string escapedByNlohmann = "\"";
    for (int k = 0; k < 6; ++k) {
      uint32_t cp = point(rng);
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x41;  // not a scalar value
      char u[16];
      if (cp >= 0x10000) {  // a surrogate pair, as JSON spells it
        const uint32_t v = cp - 0x10000;
        std::snprintf(u, sizeof u, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(u, sizeof u, "\\u%04x", cp);
      }
      escapedByNlohmann += u;
    }
    const std::string text = nlohmann::json::parse(escapedByNlohmann + "\"").get<std::string>();
    if (text.find('"') != std::string::npos || text.find('\\') != std::string::npos) continue;
    ASSERT_EQ(jsonEscape(text), text) << n;
    ASSERT_EQ(roundTrip(text), text) << n;
  }
}

}  // namespace
}  // namespace stagescope::report
