// Escaping for the report writers: JSON string bodies and XML/HTML text and attributes.
//
// Both always produce valid UTF-8, whatever the input bytes: a run file is untrusted and its
// texts (module, edge and parameter names, run ids) reach the reports as stored.  A byte
// sequence that is not well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF, no truncated sequence) becomes U+FFFD, one per offending byte, so that a
// JSON or XML parser never rejects a whole report for one bad name.
#pragma once

#include <string>
#include <string_view>

namespace stagescope::report {

std::string jsonEscape(std::string_view text);  // without the surrounding quotes
// jsonEscape(text) appended to `out` (the Chrome trace writes millions of strings).
void appendJsonEscaped(std::string& out, std::string_view text);
std::string xmlEscape(std::string_view text);  // & < > " ' escaped; other controls become '?'

}  // namespace stagescope::report
