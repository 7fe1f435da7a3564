// Escaping for the report writers: JSON string bodies and XML/HTML text and attributes.
#pragma once

#include <string>

namespace stagescope::report {

std::string jsonEscape(const std::string& text);  // without the surrounding quotes
std::string xmlEscape(const std::string& text);   // & < > " ' escaped; other controls become '?'

}  // namespace stagescope::report
