#include "ui/TimeIndex.h"

#include <algorithm>

namespace stagescope::ui {

bool countsAsBusy(events::ActionKind kind) {
  return kind == events::ActionKind::Forward || kind == events::ActionKind::Backward;
}

TimeColumns timeColumns(const std::vector<events::ActionRecord>& items) {
  TimeColumns c;
  c.startNs.reserve(items.size());
  c.endNs.reserve(items.size());
  c.busy.reserve(items.size());
  c.busyPrefixNs.reserve(items.size() + 1);
  c.busyPrefixNs.push_back(0);
  for (const auto& a : items) {
    const bool busy = countsAsBusy(a.kind);
    c.startNs.push_back(a.startNs);
    c.endNs.push_back(a.endNs);
    c.busy.push_back(busy ? 1 : 0);
    c.busyPrefixNs.push_back(c.busyPrefixNs.back() +
                             (busy ? std::max<int64_t>(0, a.endNs - a.startNs) : 0));
  }
  return c;
}

IndexRange visibleRange(const TimeColumns& items, int64_t t0, int64_t t1) {
  const auto& s = items.startNs;
  const auto& e = items.endNs;
  const size_t first = static_cast<size_t>(std::upper_bound(e.begin(), e.end(), t0) - e.begin());
  const size_t last = static_cast<size_t>(
      std::lower_bound(s.begin() + static_cast<std::ptrdiff_t>(first), s.end(), t1) - s.begin());
  return {first, std::max(first, last)};
}

void foldRange(const TimeColumns& items, IndexRange range, double nsPerPx, double minPx,
               std::vector<DrawItem>& out, double maxFoldPx) {
  const double minNs = minPx * nsPerPx;
  const double maxNs = std::max(minPx, maxFoldPx) * nsPerPx;
  const auto& S = items.startNs;
  const auto& E = items.endNs;
  const auto& P = items.busyPrefixNs;
  size_t i = range.first;
  while (i < range.last) {
    if (static_cast<double>(E[i] - S[i]) >= minNs) {
      out.push_back({i, i + 1, S[i], E[i]});
      ++i;
      continue;
    }
    // Fold (as Tracy does): absorb the following items that end within minPx of the fold's
    // end, found by binary search on end times; a wide item always ends beyond that limit.
    size_t j = i + 1;
    int64_t end = E[i];
    while (j < range.last && static_cast<double>(end - S[i]) < maxNs) {
      const int64_t limit = static_cast<int64_t>(
          std::min(static_cast<double>(end) + minNs, static_cast<double>(S[i]) + maxNs));
      const size_t k = static_cast<size_t>(
          std::lower_bound(E.begin() + static_cast<std::ptrdiff_t>(j),
                           E.begin() + static_cast<std::ptrdiff_t>(range.last), limit) -
          E.begin());
      if (k == j) break;
      j = k;
      end = E[j - 1];
    }
    DrawItem d{i, j, S[i], std::max(E[j - 1], S[i] + static_cast<int64_t>(minNs))};
    if (P.size() == items.size() + 1) {
      const double inside = static_cast<double>(P[j] - P[i]);
      d.busy = static_cast<float>(
          std::min(1.0, inside / std::max(1.0, static_cast<double>(E[j - 1] - S[i]))));
    }
    out.push_back(d);
    i = j;
  }
}

int64_t busyBefore(const TimeColumns& items, int64_t t) {
  const auto& E = items.endNs;
  // Items [0, k) ended at or before t; item k (if any) may be running at t.
  const size_t k = static_cast<size_t>(std::upper_bound(E.begin(), E.end(), t) - E.begin());
  int64_t busy = items.busyPrefixNs.empty() ? 0 : items.busyPrefixNs[k];
  if (k < items.size() && items.busy[k] && t > items.startNs[k])
    busy += std::min(t, E[k]) - items.startNs[k];
  return busy;
}

void busyPerColumn(const TimeColumns& items, double t0, double nsPerPx, int columns,
                   std::vector<float>& out) {
  out.assign(static_cast<size_t>(std::max(0, columns)), 0.0f);
  if (items.size() == 0 || columns <= 0 || nsPerPx <= 0) return;
  const auto& E = items.endNs;
  const size_t n = items.size();
  int64_t prevT = static_cast<int64_t>(t0);
  int64_t prevBusy = busyBefore(items, prevT);
  // k: the items [0, k) ended at or before the previous boundary.  Column boundaries ascend,
  // so k only moves forward: gallop from it (O(log of the items in the column)), never a
  // search over the whole row per column.
  size_t k = static_cast<size_t>(std::upper_bound(E.begin(), E.end(), prevT) - E.begin());
  for (int c = 0; c < columns; ++c) {
    const int64_t t = static_cast<int64_t>(t0 + nsPerPx * (c + 1));
    size_t lo = k, hi = k, stride = 1;
    while (hi < n && E[hi] <= t) {
      lo = hi + 1;
      hi = std::min(n, hi + stride);
      stride *= 2;
    }
    k = static_cast<size_t>(std::upper_bound(E.begin() + static_cast<std::ptrdiff_t>(lo),
                                             E.begin() + static_cast<std::ptrdiff_t>(hi), t) -
                            E.begin());
    int64_t busy = items.busyPrefixNs[k];
    if (k < n && items.busy[k] && t > items.startNs[k])
      busy += std::min(t, E[k]) - items.startNs[k];
    if (t > prevT)
      out[static_cast<size_t>(c)] = static_cast<float>(std::clamp(
          static_cast<double>(busy - prevBusy) / static_cast<double>(t - prevT), 0.0, 1.0));
    prevT = t;
    prevBusy = busy;
  }
}

int64_t itemAt(const TimeColumns& items, int64_t t, int64_t slackNs) {
  IndexRange r = visibleRange(items, t - slackNs, t + slackNs + 1);
  int64_t best = -1;
  int64_t bestDist = INT64_MAX;
  for (size_t i = r.first; i < r.last; ++i) {
    const int64_t s = items.startNs[i], e = items.endNs[i];
    int64_t d = t < s ? s - t : (t > e ? t - e : 0);
    if (d < bestDist) {
      bestDist = d;
      best = static_cast<int64_t>(i);
    }
    if (r.size() > 64 && i > r.first + 64) break;
  }
  return best;
}

IndexRange visibleRange(const std::vector<events::ActionRecord>& items, int64_t t0, int64_t t1) {
  return visibleRange(timeColumns(items), t0, t1);
}

int64_t itemAt(const std::vector<events::ActionRecord>& items, int64_t t, int64_t slackNs) {
  return itemAt(timeColumns(items), t, slackNs);
}

}  // namespace stagescope::ui
