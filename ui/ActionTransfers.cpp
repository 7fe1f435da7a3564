// The transfers one action recorded (ActionTransfers.h).
#include "ui/ActionTransfers.h"

#include <algorithm>
#include <utility>

namespace stagescope::ui {

std::vector<int64_t> transfersOfAction(const model::RunModel& model, int rank, int64_t action) {
  std::vector<int64_t> out;
  if (rank < 0 || rank >= static_cast<int>(model.actions.size())) return out;
  if (action < 0 || action >= static_cast<int64_t>(model.actions[rank].size())) return out;
  const auto& a = model.actions[rank][action];
  const auto& t = model.transfers;
  // Transfers are sorted by (iteration, microbatch, ...): binary-search the block.
  auto lo = std::lower_bound(t.begin(), t.end(), std::make_pair(a.iteration, a.microbatch),
                             [](const events::TransferRecord& x, const std::pair<int, int>& k) {
                               return std::make_pair(x.iteration, x.microbatch) < k;
                             });
  for (auto it = lo;
       it != t.end() && it->iteration == a.iteration && it->microbatch == a.microbatch; ++it) {
    if (it->rank == rank && it->actionSeq == a.seq) out.push_back(it - t.begin());
  }
  return out;
}

}  // namespace stagescope::ui
