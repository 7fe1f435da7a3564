#include "ui/CollectiveIndex.h"

#include <algorithm>

namespace stagescope::ui {

CollectiveIndex indexCollectives(const model::RunModel& model) {
  CollectiveIndex ix;
  ix.instances = analysis::collectiveInstances(model);
  ix.endOfRunNs = model.maxTimeNs;
  for (const auto& c : model.collectives)
    ix.endOfRunNs = std::max({ix.endOfRunNs, c.startNs, c.endNs});
  std::vector<std::pair<int64_t, int32_t>> order;
  order.reserve(ix.instances.size());
  for (size_t i = 0; i < ix.instances.size(); ++i) {
    const auto& c = ix.instances[i];
    order.emplace_back(c.firstStartNs, static_cast<int32_t>(i));
    ix.maxSpanNs = std::max(ix.maxSpanNs, ix.endOf(c) - c.firstStartNs);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [t, i] : order) {
    ix.startNs.push_back(t);
    ix.byStart.push_back(i);
  }
  return ix;
}

std::vector<int32_t> CollectiveIndex::visible(int64_t t0, int64_t t1) const {
  std::vector<int32_t> out;
  auto lo = std::lower_bound(startNs.begin(), startNs.end(), t0 - maxSpanNs);
  auto hi = std::upper_bound(startNs.begin(), startNs.end(), t1);
  for (auto it = lo; it != hi; ++it) {
    const int32_t i = byStart[static_cast<size_t>(it - startNs.begin())];
    if (endOf(instances[static_cast<size_t>(i)]) >= t0) out.push_back(i);
  }
  return out;
}

}  // namespace stagescope::ui
