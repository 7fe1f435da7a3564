// The Find tab: filter actions, transfers or gradients (FindFilter.h) and list the hits; a
// click selects one and moves the view to it (FindPanel.cpp).
#pragma once

#include "ui/PanelContext.h"

namespace stagescope::ui {

class FindPanel {
 public:
  // The query and its hits live in p.view (find, findHits: scripts set them too).
  void draw(PanelContext& p);
  // The next draw gives the keyboard to the first filter field (Ctrl+F, View > Find...).
  void focus() { focus_ = true; }

 private:
  bool focus_ = false;
};

}  // namespace stagescope::ui
