// Opening runs, as a panel or a script asks for it: the main run, or a second run compared
// with it.  The App implements it (ScriptTarget extends it).
#pragma once

#include <string>

namespace stagescope::ui {

class RunOpener {
 public:
  virtual ~RunOpener() = default;
  // Opens `path` as the main run (nothing when empty).
  virtual void open(const std::string& path) = 0;
  // Opens `path` as the compare run and aligns it with the main run (once that is whole).
  virtual void openCompare(const std::string& path) = 0;
  // The compare run asked for while the main run was loading ("" when none): it loads after.
  virtual const std::string& pendingCompare() const = 0;
};

}  // namespace stagescope::ui
