#include "core/analysis/Bubble.h"

#include <algorithm>
#include <climits>
#include <numeric>
#include "core/analysis/Pairing.h"

namespace stagescope::analysis {

using events::ActionKind;
using model::RunModel;

namespace {
bool isComm(ActionKind k) {
  switch (k) {
    case ActionKind::RecvForward:
    case ActionKind::SendForward:
    case ActionKind::RecvBackward:
    case ActionKind::SendBackward:
    case ActionKind::SendForwardRecvBackward:
    case ActionKind::SendBackwardRecvForward:
      return true;
    default:
      return false;
  }
}
}  // namespace

TimeBreakdown timeBreakdown(const RunModel& run) {
  TimeBreakdown tb;
  tb.microbatches = run.info.microbatches;
  int maxStage = 0;
  for (const auto& r : run.ranks) {
    maxStage = std::max(maxStage, std::max(r.totalStages, r.globalStage + 1));
  }
  tb.stages = maxStage;
  if (tb.stages > 0 && tb.microbatches > 0) {
    tb.expectedBubble =
        static_cast<double>(tb.stages - 1) / static_cast<double>(tb.microbatches + tb.stages - 1);
  }
  int iterations = 0;
  for (const auto& list : run.actions) {
    if (!list.empty()) iterations = std::max(iterations, list.back().iteration + 1);
  }
  iterations = std::max(iterations, 0);
  constexpr int64_t kNone = INT64_MIN;
  std::vector<int64_t> itStart(iterations, INT64_MAX), itEnd(iterations, kNone);
  std::vector<int64_t> fbStart(iterations, INT64_MAX), fbEnd(iterations, kNone);
  for (size_t r = 0; r < run.actions.size(); ++r) {
    // The reader already put every time on rank 0's clock (LoadOptions::applyClockOffsets):
    // subtracting RankInfo::clockOffsetNs again here would count it twice.
    constexpr int64_t off = 0;
    for (const auto& a : run.actions[r]) {
      if (a.iteration < 0 || a.iteration >= iterations) continue;
      itStart[a.iteration] = std::min(itStart[a.iteration], a.startNs - off);
      itEnd[a.iteration] = std::max(itEnd[a.iteration], a.endNs - off);
      if (a.kind == ActionKind::Forward || a.kind == ActionKind::Backward) {
        fbStart[a.iteration] = std::min(fbStart[a.iteration], a.startNs - off);
        fbEnd[a.iteration] = std::max(fbEnd[a.iteration], a.endNs - off);
      }
    }
  }
  for (int i = 0; i < iterations; ++i) {
    if (itEnd[i] != kNone) tb.stepMs.push_back(static_cast<double>(itEnd[i] - itStart[i]) / 1e6);
  }
  if (!tb.stepMs.empty()) {
    std::vector<double> s = tb.stepMs;
    std::sort(s.begin(), s.end());
    tb.medianStepMs =
        s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
    tb.meanStepMs = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
  }
  double bubbleSum = 0;
  int bubbleRanks = 0;
  for (size_t r = 0; r < run.actions.size(); ++r) {
    RankTime rt;
    rt.rank = static_cast<int>(r);
    if (const auto* info = findRank(run, rt.rank)) {
      // A colocated rank: "vision+llm", the coordinates of its first module.
      rt.module = run.colocated(rt.rank) ? run.moduleLabel(rt.rank) : info->module;
      rt.tp = info->tp;
      rt.pp = info->pp;
      rt.dp = info->dp;
      rt.globalStage = info->globalStage;
    } else if (run.actions[r].empty()) {
      continue;
    }
    std::vector<int64_t> compute(iterations, 0);
    std::vector<char> seen(iterations, 0);
    int64_t busy = 0;
    for (const auto& a : run.actions[r]) {
      int64_t d = std::max<int64_t>(a.endNs - a.startNs, 0);
      double ms = static_cast<double>(d) / 1e6;
      switch (a.kind) {
        case ActionKind::Forward:
          rt.forwardMs += ms;
          break;
        case ActionKind::Backward:
          rt.backwardMs += ms;
          break;
        default:
          if (isComm(a.kind)) {
            rt.commMs += ms;
          } else {
            rt.otherMs += ms;
          }
      }
      busy += d;
      if (a.iteration >= 0 && a.iteration < iterations) {
        seen[a.iteration] = 1;
        if (a.kind == ActionKind::Forward || a.kind == ActionKind::Backward) {
          compute[a.iteration] += d;
        }
      }
    }
    int64_t span = 0;
    double bub = 0;
    int n = 0;
    for (int i = 0; i < iterations; ++i) {
      if (!seen[i] || itEnd[i] == kNone) continue;
      span += itEnd[i] - itStart[i];
      if (fbEnd[i] != kNone && fbEnd[i] > fbStart[i]) {
        double window = static_cast<double>(fbEnd[i] - fbStart[i]);
        bub += std::clamp(1.0 - static_cast<double>(compute[i]) / window, 0.0, 1.0);
        ++n;
      }
    }
    rt.spanMs = static_cast<double>(span) / 1e6;
    rt.idleMs = std::max(0.0, static_cast<double>(span - busy) / 1e6);
    rt.bubble = n ? bub / n : 0;
    if (n) {
      bubbleSum += rt.bubble;
      ++bubbleRanks;
    }
    tb.ranks.push_back(std::move(rt));
  }
  tb.measuredBubble = bubbleRanks ? bubbleSum / bubbleRanks : 0;
  return tb;
}

}  // namespace stagescope::analysis
