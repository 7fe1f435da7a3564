#include "core/model/RunModel.h"

#include <algorithm>

namespace stagescope::model {

const events::RankInfo* RunModel::rankInfo(int rank) const {
  if (rank >= 0 && static_cast<size_t>(rank) < ranks.size() && ranks[rank].rank == rank)
    return &ranks[rank];
  auto it = std::lower_bound(ranks.begin(), ranks.end(), rank,
                             [](const events::RankInfo& r, int v) { return r.rank < v; });
  return it != ranks.end() && it->rank == rank ? &*it : nullptr;
}

size_t RunModel::eventCount() const {
  size_t n = transfers.size() + gradients.size() + losses.size();
  for (const auto& a : actions) n += a.size();
  return n;
}

}  // namespace stagescope::model
