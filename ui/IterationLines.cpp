#include "ui/IterationLines.h"

namespace stagescope::ui {

bool drawsIterationLines(size_t iterationsInView, float widthPx) {
  if (iterationsInView <= 1) return true;
  return widthPx / static_cast<float>(iterationsInView) >= kMinIterationLineGapPx;
}

}  // namespace stagescope::ui
