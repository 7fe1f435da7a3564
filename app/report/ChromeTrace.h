// `stagescope export`: a run as a Chrome trace-event JSON file (loads in Perfetto and
// chrome://tracing).
//
// Layout: one process per module (pid = module index + 1, named "module <name>"), one thread
// per rank (tid = rank, named "rank R tpT ppP dpD"), sorted by global stage.  Every executed
// action is a complete ("X") slice named like the plan ("F mb3", "SF mb2", "DP_REDUCE"); every
// recorded transfer is a nested "X" slice inside its action with shape/dtype/checksum/stats in
// args; every send/recv pair is a flow ("s" at the send, "f" with bp:"e" at the receive, id =
// the pair's index + 1), so Perfetto draws an arrow from each send to its receive.  Diagnoses
// are global instant events.  Times are microseconds from the earliest action, on rank 0's
// clock (as loaded: the reader subtracts RankInfo::clockOffsetNs once).
#pragma once

#include <string>

#include "core/model/RunModel.h"

namespace stagescope::report {

struct ChromeTraceStats {
  size_t slices = 0, transfers = 0, flows = 0, metadata = 0;
};

// Throws std::runtime_error naming the path when it cannot be written.
ChromeTraceStats writeChromeTrace(const model::RunModel& run, const std::string& path);

}  // namespace stagescope::report
