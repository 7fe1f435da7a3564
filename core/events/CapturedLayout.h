// The config text of a captured job's run (docs/capture.md "Declaring the layout").  Its first
// line says what produced the file; a layout the job declared follows it as a stagescope config
// (TOML), preceded by one "# job schedule:" comment line per rank holding the job's own view of
// its pipeline position (module, stage, global stage, total stages, warmup).
//
// The comment lines are how a job hands its schedule to the capture backend
// (stagescope_torch.megatron.declare_layout writes them).  The run file keeps what they say as
// typed rows (RunInfo::origin, RunInfo::jobSchedule: tables `run_origin`, `job_schedule`);
// nothing reads a stored config text for them except storage's reader of a file older than those
// tables.  Torch-free.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::events {

inline constexpr std::string_view kCapturedConfigLine =
    "# captured PyTorch job (stagescope c10d backend wrapping gloo)";
inline constexpr std::string_view kJobScheduleLine = "# job schedule:";

// True when `configText` begins with kCapturedConfigLine: how a file older than the
// `run_origin` table says it was captured.
inline bool beginsWithCapturedLine(std::string_view configText) {
  return configText.substr(0, kCapturedConfigLine.size()) == kCapturedConfigLine;
}

// The layout a captured run declared (its config text after the first line), or "" when the run
// is not captured or declared none.
inline std::string declaredLayoutText(const RunInfo& info) {
  if (!info.captured()) return "";
  std::string_view text = info.configText;
  if (beginsWithCapturedLine(text)) {
    const size_t eol = text.find('\n');
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
  }
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos ? "" : std::string(text);
}

// The "# job schedule:" lines of a declared layout's text, in text order (malformed lines are
// skipped).
std::vector<JobStage> parseJobSchedule(const std::string& configText);

}  // namespace stagescope::events
