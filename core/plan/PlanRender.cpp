// Terminal rendering of a plan: one column per rank, one row per step.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/plan/Plan.h"

namespace stagescope::plan {
namespace {

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

}  // namespace

std::string renderPlan(const Plan& plan, const RunConfig& config) {
  size_t width = 10;
  for (const auto& r : plan.ranks) {
    width = std::max(width, r.modules().size() + 2);
    if (r.stages.size() < 2) continue;
    for (const Action& a : r.actions) width = std::max(width, a.module.size() + 10);
  }
  std::ostringstream os;
  os << "1F1B plan: " << plan.worldSize << " ranks, " << plan.totalStages << " global stages, "
     << plan.microbatches << " microbatches" << (plan.forwardOnly ? ", forward only" : "") << " ("
     << config.sourceName << ")\n";
  auto row = [&](const std::string& label, auto&& cell) {
    os << pad(label, 10);
    for (const auto& r : plan.ranks) os << pad(cell(r), width);
    os << "\n";
  };
  row("rank", [](const RankPlan& r) { return std::to_string(r.rank); });
  row("module", [](const RankPlan& r) { return r.modules(); });
  row("tp/pp/dp", [](const RankPlan& r) {
    std::string out;
    for (const RankStage& s : r.stages) {
      out += (out.empty() ? "" : "+") + std::to_string(s.tp) + "/" + std::to_string(s.pp) + "/" +
             std::to_string(s.dp);
    }
    return out;
  });
  row("stage", [](const RankPlan& r) { return std::to_string(r.globalStage); });
  os << std::string(10 + width * plan.ranks.size(), '-') << "\n";
  size_t steps = 0;
  for (const auto& r : plan.ranks) steps = std::max(steps, r.actions.size());
  for (size_t i = 0; i < steps; ++i) {
    row(std::to_string(i), [&](const RankPlan& r) {
      if (i >= r.actions.size()) return std::string(".");
      // A rank holding several stages names the module of each action: "audio:F0".
      const Action& a = r.actions[i];
      return r.stages.size() > 1 ? a.module + ":" + actionLabel(a) : actionLabel(a);
    });
  }
  os << std::string(10 + width * plan.ranks.size(), '-') << "\n";
  row("warmup", [](const RankPlan& r) { return std::to_string(r.warmup); });
  row("steady", [](const RankPlan& r) { return std::to_string(r.steady); });
  row("cooldown", [](const RankPlan& r) { return std::to_string(r.cooldown); });
  char bubble[128];
  std::snprintf(bubble, sizeof bubble,
                "expected bubble (p-1)/(m+p-1) = %d/%d = %.3f of wall time\n", plan.totalStages - 1,
                plan.microbatches + plan.totalStages - 1, plan.expectedBubble());
  os << bubble;
  return os.str();
}

}  // namespace stagescope::plan
