// Whether a run was being written as it was read (storage/RunLiveness.h observes it), as the two
// parts every command prints: the summary ("live, 2 of 3 ranks still writing") and who writes
// ("RUN.rank0.shard being written by pid P on host H; its lock held by ...").  The parts travel
// apart so that a consumer that wants only the summary (check's status line, compare's coverage
// status) takes it by field instead of cutting the whole line at its first " (".
#pragma once

#include <string>

namespace stagescope::model {

struct LiveState {
  std::string summary;  // "live, N of M ranks still writing"; "" when nobody writes the run
  std::string detail;   // who writes it (the shard and its pid, the lock's holder); may be ""

  // Whether the run was being written: a snapshot, never a finished run.
  bool live() const { return !summary.empty(); }
  // The whole line: "SUMMARY (DETAIL)", the summary alone with no detail, "" when not live.
  std::string line() const {
    if (summary.empty()) return "";
    return detail.empty() ? summary : summary + " (" + detail + ")";
  }
};

}  // namespace stagescope::model
