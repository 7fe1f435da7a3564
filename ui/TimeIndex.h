// Visible-range search, pixel folding and per-pixel busy shares for one timeline row (Tracy's
// approach): a rank's actions are sequential, so both start and end times ascend; the visible
// slice is found by two binary searches, and runs of items thinner than `minPx` pixels fold
// into one draw item, skipping ahead by binary search so a frame costs O(pixels * log n), not
// O(n).  The row is held as columns (TimeColumns: contiguous start, end and busy-prefix arrays,
// 24 bytes per action) so that the searches touch only the times.  ImGui-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::ui {

// One row's actions as columns, in the row's order (start and end times ascend).
struct TimeColumns {
  std::vector<int64_t> startNs, endNs;  // ns, rank 0's clock
  // Whether the item counts as busy: it computes (forward or backward).  Waiting in a
  // receive, sending, the data-parallel reduction and the optimizer step do not, so a
  // pipeline bubble reads idle even though the rank is inside a receive action.
  std::vector<uint8_t> busy;
  // busyPrefixNs[i] = total duration (ns) of the busy items among [0, i): size() + 1 entries.
  // Lets a fold or a pixel column say how busy its stretch was in O(1).
  std::vector<int64_t> busyPrefixNs;
  size_t size() const { return startNs.size(); }
};

// Whether an action of `kind` counts as busy (computes): forward and backward.
bool countsAsBusy(events::ActionKind kind);

// The columns of `items` (start, end, busy flag, busy prefix).
TimeColumns timeColumns(const std::vector<events::ActionRecord>& items);

struct IndexRange {
  size_t first = 0, last = 0;  // [first, last)
  size_t size() const { return last - first; }
};

// Items with endNs > t0 and startNs < t1.
IndexRange visibleRange(const TimeColumns& items, int64_t t0, int64_t t1);

struct DrawItem {
  size_t first = 0, last = 0;  // [first, last) items covered; last - first == 1 when not folded
  int64_t startNs = 0, endNs = 0;
  float busy = 1;  // folded: share of [startNs, endNs) inside the items (0..1); else 1
  bool folded() const { return last - first > 1; }
};

// Appends draw items for `range`: an item at least `minPx` wide is drawn alone; a run of
// thinner items folds into one item covering at least `minPx` pixels and, so that a dense
// row keeps its structure instead of becoming one bar, at most about `maxFoldPx` pixels (the
// fold stops absorbing once it is that wide).  Each fold carries its busy share.
void foldRange(const TimeColumns& items, IndexRange range, double nsPerPx, double minPx,
               std::vector<DrawItem>& out, double maxFoldPx = 1e300);

// Total busy time (ns) of the row before time `t`: the durations of the busy items that ended
// before t plus the part of the busy item running at t.  Non-decreasing in t.
int64_t busyBefore(const TimeColumns& items, int64_t t);

// The zoomed-out row: for each of `columns` pixel columns of `nsPerPx` ns starting at `t0`,
// the share (0..1) of the column's time the rank spent computing (busy items).  O(columns * log n)
// whatever the number of items: at most one primitive per pixel column is drawn from it.
void busyPerColumn(const TimeColumns& items, double t0, double nsPerPx, int columns,
                   std::vector<float>& out);

// Index of the item under time `t` (with `slackNs` tolerance), or -1.
int64_t itemAt(const TimeColumns& items, int64_t t, int64_t slackNs);

// The same over ActionRecord vectors (build the columns first: O(n) per call; for tests and
// small rows).
IndexRange visibleRange(const std::vector<events::ActionRecord>& items, int64_t t0, int64_t t1);
int64_t itemAt(const std::vector<events::ActionRecord>& items, int64_t t, int64_t slackNs);

}  // namespace stagescope::ui
