// Writes a report file whole.
#pragma once

#include <string>

namespace stagescope::report {

// Writes text to path (binary, whole file); throws std::runtime_error naming the path.
void writeTextFile(const std::string& path, const std::string& text);

}  // namespace stagescope::report
