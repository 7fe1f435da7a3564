// Moves the view over the open run: the timeline's range, the replay step, the selection and
// the bottom tab, and leads to a run's problems.  The panels, the keys and the script verbs
// all move the view through it, so a movement means the same from each of them.  Times are
// in ns on the run's clock (RunModel::minTimeNs .. maxTimeNs).
#pragma once

#include <cstdint>

#include "ui/RunSlot.h"
#include "ui/ViewerState.h"

namespace stagescope::ui {

class Navigator {
 public:
  // Acts on `view` over the run of `main`; `other` (the compare slot) for divergences.
  Navigator(ViewerState& view, const RunSlot& main, const RunSlot& other);

  // The comparison of the compare run with the open main run (none while it is realigned
  // with a main run opened since).
  const analysis::Comparison* comparison() const;

  void zoomFit();
  // The view a run opens at: the whole run, or a captured job's schedule.
  void zoomOpening();
  // At least 100 ns wide (a narrower range widens around its middle).
  void zoomTo(double t0, double t1);
  void focusAction(int rank, int64_t action);
  // Zooms to a transfer's send and receive; `step` also moves the replay to its receive.
  void focusTransfer(int64_t index, bool step);
  void focusCollective(int64_t index);
  // Selects `s`; `navigate` also moves the view to it (actions, transfers, collectives).
  void select(const Selection& s, bool navigate);
  // Clamped to the replay; with followReplay the range follows the step.
  void stepTo(int64_t step);
  // Playback: `dt` seconds more at view.speed steps per second.
  void advancePlayback(float dt);
  void showTab(BottomTab tab);
  // Select and show a problem; false when the run has none of that kind.
  bool showNonFinite();   // the causally first NaN/Inf record
  bool showStuck();       // the root of the wait-for graph / first unfinished rank
  bool showDivergence();  // the first divergence from the compare run
  // Corrupt messages first (they cause the NaNs that follow), then NaN/Inf, then stuck ranks.
  void showFirstProblem();

 private:
  ViewerState& view_;
  const RunSlot& main_;
  const RunSlot& other_;
};

}  // namespace stagescope::ui
