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
// - Every collective record (a captured job's all_reduce, broadcast, ...) is an X slice
//   (cat "collective", named "all_reduce dp #3 it0") on a "rank R collectives" track of its
//   rank (tid = 2^20 + rank * 16 + lane; overlapping collectives of one rank take further
//   lanes), with op, group, group ranks, root, reduce op, shape, dtype, bytes, checksums, state
//   and the instance's agreement (analysis::collectiveInstances) in args; one that never
//   completed ends at the last recorded time.  The members of one collective are linked by
//   flow arrows (cat "collective") from each member to the next in rank order, at the moment
//   the last member joined: the collective reads as one span across its group.
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
  size_t collectives = 0, collectiveLinks = 0;
  size_t collectiveLinksSkipped = 0;  // members whose slices contradict a common moment
};

// Throws std::runtime_error naming the path when it cannot be written.
ChromeTraceStats writeChromeTrace(const model::RunModel& run, const std::string& path);

}  // namespace stagescope::report
