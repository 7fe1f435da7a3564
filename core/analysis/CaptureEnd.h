// How a captured job ended, judged from what each of its ranks recorded (events/DiagnosisKind.h).
//
// The rule (docs/capture.md "How a job ended"): a captured job is `completed` only when every
// rank 0 .. world_size-1 recorded `rank_end` (its process left normally).  A rank that recorded
// `rank_failed` (it raised, or aborted) makes the run `failed`, and the causally first such
// rank (earliest record) leads the reason.  A rank that recorded neither ended without a word
// (killed by a signal, or aborted before its shard could be written): the run is `killed`.
// Failed leads killed: a rank that raised is the cause of the peers its launcher then killed.
//
// The status rank 0 wrote at its own exit is never enough: it speaks for rank 0 alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/events/Events.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct CaptureEnd {
  events::RunStatus status = events::RunStatus::Completed;
  std::string reason;                // one line; "" when every rank left normally
  std::vector<int32_t> failedRanks;  // recorded rank_failed, earliest first
  std::vector<int32_t> silentRanks;  // recorded no end at all, ascending
  int64_t firstFailedNs = 0;         // time of the first rank_failed record (failedRanks[0])
};

// Needs the run's diagnoses and info.worldSize (a status-only load has both).
CaptureEnd judgeCaptureEnd(const model::RunModel& m);

}  // namespace stagescope::analysis
