// Checks the structure of an exported Chrome trace (app/report/ChromeTrace.h's contract):
// X slices properly nested on every (pid, tid) track, every async transfer begun and ended in
// order, every flow arrow with one start and one finish, each inside an X slice of its track,
// and the finish not before the start.  Returns one line per violation (empty: well formed).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace stagescope::testing {

struct TraceCounts {
  size_t slices = 0, asyncSlices = 0, flows = 0;
};

std::vector<std::string> traceProblems(const nlohmann::json& trace, TraceCounts* counts = nullptr);

}  // namespace stagescope::testing
