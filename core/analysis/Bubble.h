// Time accounting per rank and the measured pipeline bubble against (p-1)/(m+p-1).
#pragma once

#include <string>
#include <vector>
#include "core/model/RunModel.h"

namespace stagescope::analysis {

// Time accounting per rank, over all iterations, on rank 0's clock (the reader maps every
// rank's times onto it; nothing is subtracted here).
struct RankTime {
  int rank = -1;
  std::string module;  // "vision+llm" on a colocated rank (its modules by global stage)
  int tp = 0, pp = 0, dp = 0, globalStage = 0;  // of the rank's first module
  double forwardMs = 0, backwardMs = 0, commMs = 0, otherMs = 0, idleMs = 0, spanMs = 0;
  // 1 - compute / (the iteration's compute window, first forward start to last backward end
  // on any rank), averaged over iterations.
  double bubble = 0;
};
struct TimeBreakdown {
  std::vector<RankTime> ranks;
  std::vector<double> stepMs;  // per iteration: last action end - first action start, all ranks
  double medianStepMs = 0, meanStepMs = 0;
  double measuredBubble = 0;  // mean over ranks
  double expectedBubble = 0;  // (p-1)/(m+p-1)
  int stages = 0, microbatches = 0;
};
TimeBreakdown timeBreakdown(const model::RunModel& run);

}  // namespace stagescope::analysis
