// Visible-range search and pixel folding for one timeline row (Tracy's approach): a rank's
// actions are sequential, so both start and end times ascend; the visible slice is found by
// two binary searches, and runs of items thinner than `minPx` pixels fold into one draw
// item, skipping ahead by binary search so a frame costs O(pixels * log n), not O(n).
// ImGui-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::ui {

struct IndexRange {
  size_t first = 0, last = 0;  // [first, last)
  size_t size() const { return last - first; }
};

// Items with endNs > t0 and startNs < t1.
IndexRange visibleRange(const std::vector<events::ActionRecord>& items, int64_t t0, int64_t t1);

struct DrawItem {
  size_t first = 0, last = 0;  // [first, last) items covered; last - first == 1 when not folded
  int64_t startNs = 0, endNs = 0;
  float busy = 1;  // folded: share of [startNs, endNs) inside the items (0..1); else 1
  bool folded() const { return last - first > 1; }
};

// busyPrefix[i] = total duration (ns) of items [0, i): size items.size() + 1.  Lets a fold
// say how busy its stretch was in O(1).
std::vector<int64_t> busyPrefix(const std::vector<events::ActionRecord>& items);

// Appends draw items for `range`: an item at least `minPx` wide is drawn alone; a run of
// thinner items folds into one item covering at least `minPx` pixels and, so that a dense
// row keeps its structure instead of becoming one bar, at most about `maxFoldPx` pixels (the
// fold stops absorbing once it is that wide).  With `prefix` (busyPrefix of `items`) each fold
// carries its busy share.
void foldRange(const std::vector<events::ActionRecord>& items, IndexRange range, double nsPerPx,
               double minPx, std::vector<DrawItem>& out, double maxFoldPx = 1e300,
               const std::vector<int64_t>* prefix = nullptr);

// Index of the item under time `t` (with `slackNs` tolerance), or -1.
int64_t itemAt(const std::vector<events::ActionRecord>& items, int64_t t, int64_t slackNs);

}  // namespace stagescope::ui
