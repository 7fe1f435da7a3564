// Glue between `run`/`check` and the report library: load, check, print, write reports.
#pragma once

#include <string>

#include "core/events/Events.h"

namespace stagescope::app {

inline constexpr int kExitConfig = 2;  // bad config or command line (also plan deadlock)

struct CheckFiles {
  std::string junit, json;
  bool bitwise = true;
  double tolerance = 1e-6;
};

// Checks a run file (optionally against another); prints the text report; returns the
// check's exit code (README "Exit codes").
int checkRunFile(const std::string& path, const std::string& against, const CheckFiles& files);
int exitCodeFor(events::RunStatus status);
// The wait-for graph of a hung run, from the ranks' timeout diagnoses, in sentences.
std::string describeHang(const std::string& runPath);

}  // namespace stagescope::app
