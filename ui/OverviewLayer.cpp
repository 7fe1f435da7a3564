// The overview layer: while a run loads, its run file's overview (storage/Overview.h) is drawn
// in the timeline's place, one heat row per rank (how busy the rank was in each of the
// overview's time buckets), iteration boundaries as lines, and the load's progress on top.
#include "ui/OverviewLayer.h"

#include <algorithm>
#include <cstdio>

#include "ui/IterationLines.h"
#include "ui/Theme.h"

namespace stagescope::ui {

bool drawOverview(ImDrawList* dl, const storage::RunOverview& o, float progress, const ImVec2& pos,
                  const ImVec2& size, FrameProbes& probes) {
  const float labelW = 200, top = 48;
  const ImVec2 area0(pos.x + labelW, pos.y + top);
  const ImVec2 area1(pos.x + size.x, pos.y + size.y);
  const size_t rows = o.rows.size();
  if (rows == 0 || o.buckets <= 0) return false;
  const float rowH = std::clamp((area1.y - area0.y) / static_cast<float>(rows), 2.0f, 40.0f);
  const float cellW = (area1.x - area0.x) / static_cast<float>(o.buckets);
  const double bucketNs = o.bucketNs();
  for (size_t r = 0; r < rows; ++r) {
    const float y = area0.y + static_cast<float>(r) * rowH;
    if (y > area1.y) break;
    const auto& row = o.rows[r];
    // Neighbouring buckets of the same shade (busy share in steps of 1/32) are one rectangle:
    // a steady stretch costs one primitive, not one per bucket.
    const auto shade = [&](int b) {
      const double busy = static_cast<double>(row.busyNs[b]) / bucketNs;
      return static_cast<int>(std::clamp(busy, 0.0, 1.0) * 32 + 0.5);
    };
    FrameProbes::OverviewRow probe{row.rank, ImVec4(area0.x, y + 1, area1.x, y + rowH - 1), {}};
    for (int b = 0; b < o.buckets;) {
      const int level = shade(b);
      int e = b + 1;
      while (e < o.buckets && shade(e) == level) ++e;
      const float x0 = area0.x + static_cast<float>(b) * cellW;
      const float x1 = area0.x + static_cast<float>(e) * cellW;
      dl->AddRectFilled(ImVec2(x0, y + 1), ImVec2(std::max(x1, x0 + 1.0f), y + rowH - 1),
                        theme::heatColour(static_cast<float>(level) / 32));
      probe.runs.emplace_back(std::max(x1, x0 + 1.0f), level);
      b = e;
    }
    probes.overviewRows.push_back(std::move(probe));
    if (rowH >= 12) {
      char label[32];
      std::snprintf(label, sizeof label, "rank %d", row.rank);
      dl->AddText(ImVec2(pos.x + 8, y + (rowH - 14) / 2), theme::kTextDim, label);
    }
  }
  const double span = static_cast<double>(o.endNs - o.startNs + 1);
  const size_t iterations =
      static_cast<size_t>(std::count_if(o.iterationStartNs.begin(), o.iterationStartNs.end(),
                                        [](int64_t start) { return start != INT64_MAX; }));
  if (drawsIterationLines(iterations, area1.x - area0.x)) {  // ui/IterationLines.h
    for (int64_t start : o.iterationStartNs) {
      if (start == INT64_MAX) continue;
      const float x =
          area0.x +
          static_cast<float>((static_cast<double>(start - o.startNs)) / span) * (area1.x - area0.x);
      dl->AddLine(ImVec2(x, area0.y), ImVec2(x, area1.y), theme::kOverviewIterationLine, 1.0f);
      ++probes.overviewIterationLines;
    }
  }
  char title[160];
  std::snprintf(
      title, sizeof title, "Overview of %lld actions, %zu iterations: loading details %d%%",
      static_cast<long long>(o.items), o.iterationStartNs.size(), static_cast<int>(progress * 100));
  dl->AddText(ImVec2(pos.x + 8, pos.y + 6), theme::kText, title);
  ImGui::SetCursorScreenPos(ImVec2(pos.x + 8, pos.y + 24));
  ImGui::ProgressBar(progress, ImVec2(std::min(400.0f, size.x - 16), 16));
  return true;
}

}  // namespace stagescope::ui
