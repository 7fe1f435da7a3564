#include "ui/TimeSplit.h"

#include <algorithm>
#include <climits>

namespace stagescope::ui {

bool isCompute(events::ActionKind k) {
  return k == events::ActionKind::Forward || k == events::ActionKind::Backward ||
         k == events::ActionKind::OptimizerStep;
}
bool isCommunication(events::ActionKind k) {
  return !isCompute(k);
}

TimeSplit computeTimeSplit(const storage::RunModel& model) {
  TimeSplit out;
  const int world = static_cast<int>(model.actions.size());
  out.ranks.resize(world);
  int iterations = 0;
  for (const auto& acts : model.actions)
    for (const auto& a : acts) iterations = std::max(iterations, a.iteration + 1);
  std::vector<int64_t> lo(iterations, INT64_MAX), hi(iterations, INT64_MIN);
  for (const auto& acts : model.actions) {
    for (const auto& a : acts) {
      if (a.iteration < 0) continue;
      lo[a.iteration] = std::min(lo[a.iteration], a.startNs);
      hi[a.iteration] = std::max(hi[a.iteration], a.endNs);
    }
  }
  int64_t span = 0;
  for (int i = 0; i < iterations; ++i)
    if (hi[i] > lo[i]) span += hi[i] - lo[i];
  double bubbleSum = 0;
  int bubbleCount = 0;
  for (int r = 0; r < world; ++r) {
    RankTime& t = out.ranks[r];
    t.rank = r;
    int64_t tail = 0;  // reduction + optimizer step
    for (const auto& a : model.actions[r]) {
      int64_t d = std::max<int64_t>(0, a.endNs - a.startNs);
      if (isCompute(a.kind))
        t.computeNs += d;
      else
        t.commNs += d;
      if (a.kind == events::ActionKind::Forward || a.kind == events::ActionKind::Backward)
        t.forwardBackwardNs += d;
      if (a.kind == events::ActionKind::DpReduce || a.kind == events::ActionKind::OptimizerStep)
        tail += d;
    }
    t.spanNs = model.actions[r].empty() ? 0 : span;
    t.idleNs = std::max<int64_t>(0, t.spanNs - t.computeNs - t.commNs);
    int64_t pipeline = t.spanNs - tail;
    if (pipeline > 0) {
      t.bubble = 1.0 - static_cast<double>(t.forwardBackwardNs) / static_cast<double>(pipeline);
      bubbleSum += t.bubble;
      ++bubbleCount;
    }
  }
  for (const auto& ri : model.ranks) out.stages = std::max(out.stages, ri.totalStages);
  out.microbatches = model.info.microbatches;
  int p = out.stages, m = out.microbatches;
  out.expectedBubble = (p > 0 && m + p - 1 > 0) ? static_cast<double>(p - 1) / (m + p - 1) : 0.0;
  out.meanBubble = bubbleCount ? bubbleSum / bubbleCount : 0.0;
  return out;
}

}  // namespace stagescope::ui
