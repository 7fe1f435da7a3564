// Where the Chrome trace (ChromeTrace.h) puts each slice: every rank's action slices made
// disjoint, flow arrows' ends kept inside their slices and never pointing backwards, and each
// rank's collectives spread over lanes (tracks) so that slices on one track never overlap.
// Times in ns on the run's common clock.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::report {

// An action's slice on its rank's track, in ns.
struct Span {
  int64_t start = 0, end = 0;
};

// The slices of every rank's executed actions, made disjoint: a rank runs one action at a
// time, so an action recorded as starting before its predecessor ended (clock granularity)
// starts at that end instead.  Disjoint slices on one track are trivially well nested.
// Indexed as run.actions.
std::vector<std::vector<Span>> actionSpans(const model::RunModel& run);

// A point strictly inside `span` where possible (a flow binds to the slice enclosing it; at
// a shared boundary it could bind to the neighbour).
int64_t inside(const Span& span, int64_t t);

// The ends of a flow arrow: from the send's post time inside the sending action to the
// receive's completion inside the receiving action.  A receive completes after its send was
// posted, so to >= from on a common clock; when the recorded times say otherwise (clock
// offsets between hosts estimated too coarsely), the start moves to the sending action's
// beginning, and if that is still later the arrow is not drawn (false).
bool flowPoints(const Span& send, int64_t sendStart, const Span& recv, int64_t recvEnd,
                int64_t* from, int64_t* to);

// Collectives: every member's record is a slice on a "collectives" track of its rank.  A
// rank's collectives may overlap (asynchronous all-reduces), so each goes to the first lane
// of that rank where it does not: disjoint slices per track, hence properly nested.
inline constexpr int kCollectiveTid = 1 << 20;  // tid = kCollectiveTid + rank * kLanes + lane
inline constexpr int kLanes = 16;

struct CollectiveSlice {
  size_t index = 0;  // in run.collectives
  Span span;
  int lane = 0;
};

// Each rank's collective slices by start time, with their lanes.  `endOfRun` closes the slice
// of a collective that never completed (pending, failed).
std::map<int, std::vector<CollectiveSlice>> collectiveSlices(const model::RunModel& run,
                                                             int64_t endOfRun);

}  // namespace stagescope::report
