// The "Open run" dialog: a path field (p.view.openPath), the recent runs, Open and Cancel.
// Opens the main run, or a run to compare with it (OpenDialog.cpp).
#pragma once

#include "ui/PanelContext.h"

namespace stagescope::ui {

class OpenDialog {
 public:
  // The dialog opens at the next draw; `compare`: for a run to compare with the open one.
  void show(bool compare) {
    show_ = true;
    compare_ = compare;
  }
  // Ctrl+O: opens at the next draw, for what it was last opened for.
  void reopen() { show_ = true; }
  void draw(PanelContext& p);

 private:
  bool show_ = false, compare_ = false;
};

}  // namespace stagescope::ui
