// `stagescope export`: a run as a Chrome trace-event JSON file (loads in Perfetto and
// chrome://tracing).
//
// Layout: one process per module (pid = module index + 1, named "module <name>"), one thread
// track per rank (tid = rank, named "rank R tpT ppP dpD"), sorted by global stage.
// - Every executed action is a complete ("X") slice on its rank's track, named like the plan
//   ("F mb3", "SF mb2", "DP_REDUCE"); a rank's slices are disjoint, hence properly nested.
// - Every recorded transfer is an asynchronous slice ("b"/"e", cat "send" or "recv", id =
//   its position in RunModel::transfers + 1) with shape/dtype/checksum/stats in args: sends
//   and receives overlap each other and outlive their action, so they get Perfetto's async
//   tracks rather than the rank's thread track.
// - Every send/recv pair is a flow ("s" inside the sending action at the send's post time,
//   "f" with bp:"e" inside the receiving action at the receive's completion; id = the pair's
//   index + 1), with ts(f) >= ts(s); pairs whose recorded times contradict that, or whose
//   action is missing, are counted in flowsSkipped instead of drawn backwards.
// - Diagnoses are global instant events.
// Times are microseconds from the earliest action, on the read model's common clock (the
// reader subtracted each rank's clock offset once; nothing is subtracted here).
#pragma once

#include <string>

#include "core/model/RunModel.h"

namespace stagescope::report {

struct ChromeTraceStats {
  size_t slices = 0, transfers = 0, flows = 0, metadata = 0;
  size_t flowsSkipped = 0;  // pairs without an arrow (missing action, contradictory times)
};

// Throws std::runtime_error naming the path when it cannot be written.
ChromeTraceStats writeChromeTrace(const model::RunModel& run, const std::string& path);

}  // namespace stagescope::report
