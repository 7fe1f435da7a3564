// What a panel draws from and acts on in one frame: the two run slots (read only), the view,
// the frame's probes (what was drawn where, for the tests), the Navigator that moves the view
// and the RunOpener that opens runs.  The App makes one and hands it to each panel; a panel keeps
// only its own state (its caches, its widgets' buffers) and reaches everything else through this.
#pragma once

#include "ui/FrameProbes.h"
#include "ui/LoadedRun.h"
#include "ui/Navigator.h"
#include "ui/RunOpener.h"
#include "ui/RunSlot.h"
#include "ui/ViewerState.h"

namespace stagescope::ui {

struct PanelContext {
  const RunSlot& main;   // the open run
  const RunSlot& other;  // the compare run
  ViewerState& view;
  FrameProbes& probes;
  Navigator& nav;
  RunOpener& opener;  // a panel that opens a run (the Compare tab)

  const LoadedRun* run() const { return main.run.get(); }
};

}  // namespace stagescope::ui
