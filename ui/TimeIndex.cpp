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

std::vector<int64_t> busyPrefix(const std::vector<events::ActionRecord>& items) {
  std::vector<int64_t> prefix(items.size() + 1, 0);
  for (size_t i = 0; i < items.size(); ++i)
    prefix[i + 1] = prefix[i] + std::max<int64_t>(0, items[i].endNs - items[i].startNs);
  return prefix;
}

void foldRange(const std::vector<events::ActionRecord>& items, IndexRange range, double nsPerPx,
               double minPx, std::vector<DrawItem>& out, double maxFoldPx,
               const std::vector<int64_t>* prefix) {
  const double minNs = minPx * nsPerPx;
  const double maxNs = std::max(minPx, maxFoldPx) * nsPerPx;
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
    while (j < range.last && static_cast<double>(end - a.startNs) < maxNs) {
      const int64_t limit = static_cast<int64_t>(
          std::min(static_cast<double>(end) + minNs, static_cast<double>(a.startNs) + maxNs));
      auto it =
          std::partition_point(items.begin() + static_cast<std::ptrdiff_t>(j),
                               items.begin() + static_cast<std::ptrdiff_t>(range.last),
                               [limit](const events::ActionRecord& b) { return b.endNs < limit; });
      size_t k = static_cast<size_t>(it - items.begin());
      if (k == j) break;
      j = k;
      end = items[j - 1].endNs;
    }
    DrawItem d{i, j, a.startNs,
               std::max(items[j - 1].endNs, a.startNs + static_cast<int64_t>(minNs))};
    if (prefix && prefix->size() == items.size() + 1) {
      const double inside = static_cast<double>((*prefix)[j] - (*prefix)[i]);
      d.busy = static_cast<float>(std::min(
          1.0, inside / std::max(1.0, static_cast<double>(items[j - 1].endNs - a.startNs))));
    }
    out.push_back(d);
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
