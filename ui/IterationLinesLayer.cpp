// The timeline's iteration lines: where each iteration's first action begins, a line across
// the rows while they are far enough apart to tell from the rows' shading
// (ui/IterationLines.h); the ruler marks and labels them either way (Timeline.cpp).
#include "ui/IterationLinesLayer.h"

#include <cstdint>
#include <vector>

#include "ui/IterationLines.h"
#include "ui/Theme.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {

void drawIterationLines(const TimelineContext& ctx) {
  const auto& starts = ctx.run->iterationStartNs;
  std::vector<float> iterationXs;
  for (size_t it = 0; it < starts.size(); ++it) {
    if (starts[it] == INT64_MAX) continue;
    const float x = ctx.xOf(static_cast<double>(starts[it]));
    if (x >= ctx.area0.x && x <= ctx.area1.x) iterationXs.push_back(x);
  }
  ctx.probes->timelineIterationLines = 0;
  if (!drawsIterationLines(iterationXs.size(), ctx.area1.x - ctx.area0.x)) return;
  for (const float x : iterationXs)
    ctx.dl->AddLine(ImVec2(x, ctx.area0.y), ImVec2(x, ctx.area1.y), theme::kIterationLine, 1.5f);
  ctx.probes->timelineIterationLines = static_cast<int>(iterationXs.size());
}

}  // namespace stagescope::ui
