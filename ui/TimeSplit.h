// Per-rank time split into compute / communication / idle and the measured pipeline bubble
// against the 1F1B expectation (p-1)/(m+p-1).  ImGui-free.
//
// Per iteration the wall span is [earliest start, latest end] over all ranks.  compute =
// forward + backward + optimizer step; communication = every send/receive action and the
// data-parallel reduction (waiting inside a receive counts as communication, as a trace
// shows it); idle = span - compute - communication.  The measured bubble of a rank is the
// share of the pipeline part of the span (span minus its reduction and optimizer step)
// not spent in forward/backward.
#pragma once

#include <cstdint>
#include <vector>

#include "storage/RunModel.h"

namespace stagescope::ui {

struct RankTime {
  int rank = -1;
  int64_t computeNs = 0, commNs = 0, idleNs = 0, spanNs = 0;
  int64_t forwardBackwardNs = 0;
  double bubble = 0;
};

struct TimeSplit {
  std::vector<RankTime> ranks;  // index = rank
  int stages = 0;               // p
  int microbatches = 0;         // m
  double expectedBubble = 0;    // (p-1)/(m+p-1)
  double meanBubble = 0;        // over ranks with actions
};

TimeSplit computeTimeSplit(const storage::RunModel& model);

bool isCompute(events::ActionKind kind);
bool isCommunication(events::ActionKind kind);

}  // namespace stagescope::ui
