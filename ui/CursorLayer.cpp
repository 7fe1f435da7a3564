// The timeline's cursors: the replay step's moment as a dashed line across the rows, and the
// time range being selected with a right drag (shaded, with its length).
#include "ui/CursorLayer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ui/Formatting.h"
#include "ui/Theme.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {

void drawTimeCursors(const TimelineContext& ctx, const TimeRangeDrag& range) {
  ImDrawList* dl = ctx.dl;
  const auto& steps = ctx.run->replay.steps();
  // Global time of the current step.
  if (ctx.step > 0 && ctx.step <= static_cast<int64_t>(ctx.run->replay.size())) {
    const ReplayStep& s = steps[ctx.step - 1];
    const auto& a = ctx.model().actions[s.rank][s.action];
    const float x = ctx.xOf(static_cast<double>(s.end ? a.endNs : a.startNs));
    for (float yy = ctx.area0.y; yy < ctx.area1.y; yy += 8)
      dl->AddLine(ImVec2(x, yy), ImVec2(x, std::min(yy + 4, ctx.area1.y)), theme::kReplayLine);
  }
  if (!range.active) return;
  const float xa = ctx.xOf(range.startNs), xb = ctx.mouse.x;
  dl->AddRectFilled(ImVec2(std::min(xa, xb), ctx.area0.y), ImVec2(std::max(xa, xb), ctx.area1.y),
                    theme::kRangeSelection);
  const std::string d = formatDuration(std::fabs(ctx.mouseT - range.startNs));
  dl->AddText(ImVec2(std::max(xa, xb) + 4, ctx.area0.y + 4), theme::kText, d.c_str());
}

}  // namespace stagescope::ui
