// The config text of a captured job's run (docs/capture.md "Declaring the layout"): its first
// line says what produced the file; a layout the job declared follows it as a stagescope config
// (TOML), preceded by one "# job schedule:" comment line per rank holding the job's own view of
// its pipeline position (module, stage, global stage, total stages, warmup), so the plan of the
// layout and the schedule the job ran can be set side by side.  Torch-free.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace stagescope::events {

inline constexpr std::string_view kCapturedConfigLine =
    "# captured PyTorch job (stagescope c10d backend wrapping gloo)";
inline constexpr std::string_view kJobScheduleLine = "# job schedule:";

// True when `configText` is a captured job's (its first line is kCapturedConfigLine).
inline bool isCapturedConfig(std::string_view configText) {
  return configText.substr(0, kCapturedConfigLine.size()) == kCapturedConfigLine;
}

// The layout a captured job declared (everything after the first line), or "" when none.
inline std::string declaredLayoutText(std::string_view configText) {
  if (!isCapturedConfig(configText)) return "";
  const size_t eol = configText.find('\n');
  if (eol == std::string_view::npos) return "";
  std::string rest(configText.substr(eol + 1));
  return rest.find_first_not_of(" \t\r\n") == std::string::npos ? "" : rest;
}

// One rank's own view of its pipeline position, as the job declared it ("# job schedule:").
struct JobStage {
  int rank = -1;
  std::string module;
  int stage = -1, globalStage = -1, totalStages = -1, warmup = -1;
};

// The "# job schedule:" lines of a captured run's config text (malformed lines are skipped).
std::vector<JobStage> parseJobSchedule(const std::string& configText);

}  // namespace stagescope::events
