// The plan overlay on a captured job's rows (View > Planned schedule overlay, key P).
//
// A captured job records its messages, not stagescope's actions, so the overlay of
// stagescope's own runs (each action beside its planned one, by index) does not apply. For a
// job that declared its layout, analysis::judgeAgainstPlan (the rule of `check`'s plan_order)
// matches the job's messages to the plan's communication actions; each planned action the job
// reached is drawn as a bracket over the operations that carried its messages, labelled with
// the plan's action ("SF_RB 2/0"): green where the job posted exactly its messages, red where
// the rank deviated or stopped (the label then says what the plan expected there). A planned
// action none of whose messages was recorded is drawn after the rank's last operation.
#include "ui/CapturedPlanLayer.h"

#include <algorithm>

#include "ui/Theme.h"
#include "ui/TimelineContext.h"

namespace stagescope::ui {
namespace {

// Index of the first action of `acts` (sorted by iteration, seq) at or after (iteration, seq).
size_t lowerBound(const std::vector<events::ActionRecord>& acts, int iteration, int64_t seq) {
  return static_cast<size_t>(
      std::lower_bound(acts.begin(), acts.end(), std::make_pair(iteration, seq),
                       [](const events::ActionRecord& a, const std::pair<int, int64_t>& k) {
                         return std::make_pair(a.iteration, static_cast<int64_t>(a.seq)) < k;
                       }) -
      acts.begin());
}

// The time range [start, end] of the operations a span covers; false when none was recorded.
bool spanTimes(const std::vector<events::ActionRecord>& acts, const analysis::PlanSpan& s,
               int64_t* start, int64_t* end) {
  if (s.firstSeq < 0) return false;
  const size_t from = lowerBound(acts, s.iteration, s.firstSeq);
  const size_t to = lowerBound(acts, s.iteration, s.lastSeq + 1);
  if (from >= to) return false;
  *start = acts[from].startNs;
  *end = acts[from].endNs;
  for (size_t i = from; i < to; ++i) {
    *start = std::min(*start, acts[i].startNs);
    *end = std::max(*end, acts[i].endNs);
  }
  return true;
}

}  // namespace

void drawCapturedPlan(const TimelineContext& ctx) {
  const LoadedRun* run = ctx.run;
  if (!run || !run->detailsLoaded || !run->problems.planConformance.judged) return;
  const auto& model = run->model;
  const float rowH = ctx.rowH;
  const std::vector<float>& rowY = ctx.rowY;
  const ImVec2 area0 = ctx.area0, area1 = ctx.area1;
  ImDrawList* dl = ctx.dl;
  auto xOf = [&](int64_t t) { return ctx.xOf(static_cast<double>(t)); };
  for (size_t i = 0; i < run->rows.size() && i < rowY.size(); ++i) {
    if (i > 0 && run->rows[i].rank == run->rows[i - 1].rank) continue;  // once per rank
    const int rank = run->rows[i].rank;
    const auto& ranks = run->problems.planConformance.ranks;
    if (rank < 0 || rank >= static_cast<int>(ranks.size()) ||
        rank >= static_cast<int>(model.actions.size()))
      continue;
    const auto& acts = model.actions[static_cast<size_t>(rank)];
    const float y = rowY[i];
    if (y > area1.y || y + rowH < area0.y) continue;
    for (const analysis::PlanSpan& s : ranks[static_cast<size_t>(rank)].spans) {
      int64_t t0 = 0, t1 = 0;
      if (!spanTimes(acts, s, &t0, &t1)) {
        if (s.matched) continue;
        t0 = acts.empty() ? model.minTimeNs : acts.back().endNs;  // never recorded: after the last
        t1 = t0;
      }
      const float x0 = xOf(t0), x1 = std::max(xOf(t1), x0 + 4.0f);
      if (x1 < area0.x || x0 > area1.x) continue;
      const ImU32 c = s.matched ? theme::kGood : theme::kBad;
      // A bracket over the row's top edge: the action's extent, ticks at both ends.
      dl->AddLine(ImVec2(x0, y + 1), ImVec2(x1, y + 1), c, s.matched ? 1.5f : 3.0f);
      dl->AddLine(ImVec2(x0, y + 1), ImVec2(x0, y + 5), c, 1.5f);
      dl->AddLine(ImVec2(x1, y + 1), ImVec2(x1, y + 5), c, 1.5f);
      if (!s.matched) dl->AddRect(ImVec2(x0 - 1, y), ImVec2(x1 + 1, y + rowH), c, 0, 0, 2.5f);
      const std::string label = (s.matched ? "" : "plan: ") + s.label;
      const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
      if (!s.matched || ts.x + 4 < x1 - x0)
        dl->AddText(ImVec2(x0 + 2, y + 3), s.matched ? theme::kTextDim : c, label.c_str());
      ctx.probes->planSpans.push_back({rank, ImVec4(x0, y, x1, y + rowH), c});
    }
  }
}

}  // namespace stagescope::ui
