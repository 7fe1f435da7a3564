// Writers of a `stagescope check` report (analysis::CheckReport): JUnit XML, JSON, text.
#pragma once

#include <string>

#include "core/analysis/Check.h"

namespace stagescope::report {

// JUnit XML: one <testsuite name="stagescope.check">, one <testcase> per check class, a
// <failure> with all findings for failing classes, <skipped/> for skipped ones.
// Throws std::runtime_error when the file cannot be written.
void writeJUnit(const analysis::CheckReport& report, const std::string& path);
std::string renderJUnit(const analysis::CheckReport& report);
// JSON: {run, exit_code, passed, checks:[{name, exit_code, status, summary, total,
// findings:[...]}]}.
void writeCheckJson(const analysis::CheckReport& report, const std::string& path);
std::string renderCheckJson(const analysis::CheckReport& report);
// Plain text for a terminal / CI log: one line per class, then the findings.
std::string renderCheckText(const analysis::CheckReport& report);

}  // namespace stagescope::report
