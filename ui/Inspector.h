// The inspector: the panel right of the timeline with the details of the selection (an
// action, a transfer and its payload, a gradient, a loss, a collective, a stuck rank), run
// B's side of it when a comparison is open, and the run's summary when nothing is selected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "imgui.h"
#include "ui/PanelContext.h"

namespace stagescope::ui {

// The payload of the transfer the inspector shows last: read once per selected transfer.
struct InspectorPayload {
  int64_t index = -2;         // the transfer it was read for (-2: none yet)
  std::vector<float> values;  // as float32
  std::string note;           // why there are none
};

class Inspector {
 public:
  // Draws the panel over `pos`, `size` (screen coordinates); records its rectangle.
  void draw(PanelContext& panel, const ImVec2& pos, const ImVec2& size);
  // Forgets the payload read: a run opened since has other transfers at the same indices.
  void forget() { payload_ = {}; }

 private:
  InspectorPayload payload_;
};

}  // namespace stagescope::ui
