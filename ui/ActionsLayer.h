// The timeline's actions layer (ActionsLayer.cpp): each row's actions, folded when dense, and
// the replay cursor under each row.
#pragma once

#include "ui/TimeIndex.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {

class ActionsLayer {
 public:
  // Row `row`'s actions at replay state `st`; returns what the mouse is on in it.
  TimelineHover drawRow(const TimelineContext& ctx, size_t row, const RankReplayState& st);
  // Forgets the busy shares it drew: a run opened since may reuse the old one's address.
  void forget() { busyCache_.clear(); }

 private:
  // A row with more actions in view than fit: its busy share per pixel column.
  TimelineHover drawDenseRow(const TimelineContext& ctx, size_t row, const RankReplayState& st);
  // One drawn item of a row; true when the mouse is on it.
  bool drawActionItem(const TimelineContext& ctx, size_t row, const RankReplayState& st,
                      const DrawItem& d, float* prevX1);
  // One timeline row zoomed out: its busy share per pixel column between p0.x and p1.x.
  void drawBusyRow(const TimelineContext& ctx, int rank, const RankReplayState& st,
                   const ImVec2& p0, const ImVec2& p1);

  std::vector<DrawItem> drawScratch_;  // the row being drawn's items (reused)
  // drawBusyRow: per rank, the busy shares of the last columns drawn and what they were for.
  struct BusyCache {
    const LoadedRun* run = nullptr;
    double t0 = 0, nsPerPx = 0;
    int columns = 0;
    std::vector<float> busy;
  };
  std::vector<BusyCache> busyCache_;
};

// The replay cursor under row `row`: where its rank is at replay state `st`.
void drawReplayCursor(const TimelineContext& ctx, size_t row, const RankReplayState& st);

}  // namespace stagescope::ui
