// What a script verb (ScriptVerbs.h) may do to the viewer: open runs (RunOpener), read and set the
// view, move it, ask for a screenshot, quit.  The verbs act on this and nothing else of the App,
// which implements it.
#pragma once

#include <string>

#include "ui/LoadedRun.h"
#include "ui/Navigator.h"
#include "ui/RunOpener.h"
#include "ui/ViewerState.h"

namespace stagescope::ui {

class ScriptTarget : public RunOpener {
 public:
  // The open main run (null when none); whether one is being loaded; why the last one could
  // not be opened ("" when it could).
  virtual const LoadedRun* run() const = 0;
  virtual bool loading() const = 0;
  virtual const std::string& loadError() const = 0;
  virtual ViewerState& state() = 0;
  virtual Navigator& navigator() = 0;
  // A PNG of the window (and PATH.probes) written after this frame is rendered.
  virtual void requestScreenshot(const std::string& path) = 0;
  virtual void quit() = 0;
};

}  // namespace stagescope::ui
