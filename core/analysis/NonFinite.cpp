#include "core/analysis/NonFinite.h"

#include <algorithm>
#include <cmath>

namespace stagescope::analysis {

bool isNonFinite(const events::TransferRecord& t) {
  return t.hasStats && (t.stats.nanCount > 0 || t.stats.infCount > 0);
}

bool isNonFinite(const events::GradientRecord& g) {
  return (g.hasStats && (g.stats.nanCount > 0 || g.stats.infCount > 0)) || !std::isfinite(g.norm);
}

std::vector<NonFiniteRecord> nonFiniteInCausalOrder(const model::RunModel& run) {
  bool any = std::any_of(run.transfers.begin(), run.transfers.end(),
                         [](const auto& t) { return isNonFinite(t); }) ||
             std::any_of(run.gradients.begin(), run.gradients.end(),
                         [](const auto& g) { return isNonFinite(g); }) ||
             std::any_of(run.losses.begin(), run.losses.end(),
                         [](const auto& l) { return !std::isfinite(l.loss); });
  if (!any) return {};
  const CausalOrder order(run);
  return nonFiniteInCausalOrder(run, order);
}

std::vector<NonFiniteRecord> nonFiniteInCausalOrder(const model::RunModel& run,
                                                    const CausalOrder& order) {
  using Kind = NonFiniteRecord::Kind;
  std::vector<NonFiniteRecord> out;
  for (size_t i = 0; i < run.transfers.size(); ++i) {
    const auto& t = run.transfers[i];
    if (!isNonFinite(t)) continue;
    out.push_back({Kind::Transfer, static_cast<int64_t>(i), t.rank, t.iteration, t.microbatch,
                   order.ofTransfer(static_cast<int64_t>(i))});
  }
  for (size_t i = 0; i < run.gradients.size(); ++i) {
    const auto& g = run.gradients[i];
    if (g.phase == events::GradPhase::Reference || g.phase == events::GradPhase::ParamInitial) {
      continue;
    }
    if (!isNonFinite(g)) continue;
    out.push_back({Kind::Gradient, static_cast<int64_t>(i), g.rank, g.iteration, g.microbatch,
                   order.ofGradient(g)});
  }
  for (size_t i = 0; i < run.losses.size(); ++i) {
    const auto& l = run.losses[i];
    if (std::isfinite(l.loss) || l.rank < 0) continue;  // rank < 0: reference rows
    out.push_back(
        {Kind::Loss, static_cast<int64_t>(i), l.rank, l.iteration, l.microbatch, order.ofLoss(l)});
  }
  std::stable_sort(out.begin(), out.end(), [](const NonFiniteRecord& a, const NonFiniteRecord& b) {
    return a.causal < b.causal;
  });
  return out;
}

}  // namespace stagescope::analysis
