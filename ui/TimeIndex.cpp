#include "ui/TimeIndex.h"

#include <algorithm>

namespace stagescope::ui {

IndexRange visibleRange(const std::vector<events::ActionRecord>& items, int64_t t0, int64_t t1) {
  auto first = std::partition_point(items.begin(), items.end(),
                                    [t0](const events::ActionRecord& a) { return a.endNs <= t0; });
  auto last = std::partition_point(first, items.end(),
                                   [t1](const events::ActionRecord& a) { return a.startNs < t1; });
  return {static_cast<size_t>(first - items.begin()), static_cast<size_t>(last - items.begin())};
}

void foldRange(const std::vector<events::ActionRecord>& items, IndexRange range, double nsPerPx,
               double minPx, std::vector<DrawItem>& out) {
  const double minNs = minPx * nsPerPx;
  size_t i = range.first;
  while (i < range.last) {
    const auto& a = items[i];
    if (static_cast<double>(a.endNs - a.startNs) >= minNs) {
      out.push_back({i, i + 1, a.startNs, a.endNs});
      ++i;
      continue;
    }
    // Fold (as Tracy does): absorb the following items that end within minPx of the fold's
    // end, found by binary search on end times; a wide item always ends beyond that limit.
    size_t j = i + 1;
    int64_t end = a.endNs;
    while (j < range.last) {
      const int64_t limit = end + static_cast<int64_t>(minNs);
      auto it =
          std::partition_point(items.begin() + static_cast<std::ptrdiff_t>(j),
                               items.begin() + static_cast<std::ptrdiff_t>(range.last),
                               [limit](const events::ActionRecord& b) { return b.endNs < limit; });
      size_t k = static_cast<size_t>(it - items.begin());
      if (k == j) break;
      j = k;
      end = items[j - 1].endNs;
    }
    out.push_back(
        {i, j, a.startNs, std::max(items[j - 1].endNs, a.startNs + static_cast<int64_t>(minNs))});
    i = j;
  }
}

int64_t itemAt(const std::vector<events::ActionRecord>& items, int64_t t, int64_t slackNs) {
  IndexRange r = visibleRange(items, t - slackNs, t + slackNs + 1);
  int64_t best = -1;
  int64_t bestDist = INT64_MAX;
  for (size_t i = r.first; i < r.last; ++i) {
    const auto& a = items[i];
    int64_t d = t < a.startNs ? a.startNs - t : (t > a.endNs ? t - a.endNs : 0);
    if (d < bestDist) {
      bestDist = d;
      best = static_cast<int64_t>(i);
    }
    if (r.size() > 64 && i > r.first + 64) break;
  }
  return best;
}

}  // namespace stagescope::ui
