#include "app/report/TraceLayout.h"

#include <algorithm>

namespace stagescope::report {

using model::RunModel;

std::vector<std::vector<Span>> actionSpans(const RunModel& run) {
  std::vector<std::vector<Span>> out(run.actions.size());
  for (size_t r = 0; r < run.actions.size(); ++r) {
    int64_t previousEnd = INT64_MIN;
    for (const auto& a : run.actions[r]) {
      Span s{std::max(a.startNs, previousEnd), 0};
      s.end = std::max(a.endNs, s.start);
      previousEnd = s.end;
      out[r].push_back(s);
    }
  }
  return out;
}

int64_t inside(const Span& span, int64_t t) {
  if (span.end - span.start < 2) return span.start;
  return std::clamp(t, span.start + 1, span.end - 1);
}

bool flowPoints(const Span& send, int64_t sendStart, const Span& recv, int64_t recvEnd,
                int64_t* from, int64_t* to) {
  *from = inside(send, sendStart != 0 ? sendStart : send.start);
  *to = inside(recv, recvEnd != 0 ? recvEnd : recv.end);
  if (*to < *from) *from = inside(send, send.start);
  return *to >= *from;
}

std::map<int, std::vector<CollectiveSlice>> collectiveSlices(const RunModel& run,
                                                             int64_t endOfRun) {
  std::map<int, std::vector<CollectiveSlice>> byRank;
  for (size_t i = 0; i < run.collectives.size(); ++i) {
    const auto& c = run.collectives[i];
    if (c.startNs == 0) continue;
    CollectiveSlice s{i, {c.startNs, c.endNs != 0 ? c.endNs : std::max(endOfRun, c.startNs)}, 0};
    s.span.end = std::max(s.span.end, s.span.start);
    byRank[c.rank].push_back(s);
  }
  for (auto& [rank, slices] : byRank) {
    std::stable_sort(slices.begin(), slices.end(),
                     [](const auto& a, const auto& b) { return a.span.start < b.span.start; });
    std::vector<int64_t> laneEnd;
    for (auto& s : slices) {
      size_t lane = 0;
      while (lane < laneEnd.size() && laneEnd[lane] > s.span.start) ++lane;
      if (lane == laneEnd.size()) {
        if (laneEnd.size() < static_cast<size_t>(kLanes)) {
          laneEnd.push_back(INT64_MIN);
        } else {  // more than kLanes at once: the last lane, starting where it is free
          lane = laneEnd.size() - 1;
          s.span.start = std::max(s.span.start, laneEnd[lane]);
          s.span.end = std::max(s.span.end, s.span.start);
        }
      }
      s.lane = static_cast<int>(lane);
      laneEnd[lane] = s.span.end;
    }
  }
  return byRank;
}

}  // namespace stagescope::report
