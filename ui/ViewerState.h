// View state, kept apart from the data (LoadedRun): what the user looks at and has selected.
// Persisted in part by Settings.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ui/FindFilter.h"

namespace stagescope::ui {

struct Selection {
  enum class Kind : uint8_t {
    None,
    Action,
    Transfer,
    Gradient,
    Loss,
    Collective,
    Stuck  // the operation `rank` never completed (drawn after its last action; index -1)
  } kind = Kind::None;
  int rank = -1;
  // Action: index in actions[rank]; Collective: index in LoadedRun::collectives.instances
  // (rank: the member clicked); Stuck: -1; others: index into the model vector.
  int64_t index = -1;
  bool operator==(const Selection&) const = default;
};

enum class BottomTab : int { GridMap = 0, Plots, Compare, Find, RunInfo, Count };

struct ViewerState {
  // Timeline (absolute ns of the run's clock).
  double viewStart = 0, viewEnd = 1;
  float scrollY = 0;
  float rowHeight = 24;
  bool showArrows = true;
  bool showPlan = false;
  bool showIdle = true;
  bool fitPending = true;
  // Replay.
  int64_t step = 0;
  bool playing = false;
  float speed = 40;  // steps per second
  double playAccumulator = 0;
  bool followReplay = false;
  // Layout.
  float inspectorWidth = 400;
  float bottomHeight = 330;
  BottomTab tab = BottomTab::GridMap;
  bool tabRequested = false;
  // Selection and panels.
  Selection selection;
  Selection hovered;
  FindQuery find;
  bool findDirty = true;
  std::vector<FindHit> findHits;
  size_t findTotal = 0;
  int plotParam = 0;
  bool compareDifferencesOnly = true;
  std::vector<std::string> recent;
  // The path typed in the Open dialog or the Compare tab's field: one text, shared by both.
  std::string openPath;
};

}  // namespace stagescope::ui
