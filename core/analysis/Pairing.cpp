#include "core/analysis/Pairing.h"

#include <algorithm>

#include "core/model/Pairing.h"

namespace stagescope::analysis {

using events::TransferRecord;
using model::RunModel;
using model::TransferPair;

const events::RankInfo* findRank(const RunModel& run, int rank) {
  if (const auto* r = run.rankInfo(rank)) return r;
  for (const auto& r : run.ranks) {  // rows a caller built out of order
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

const events::RankInfo* findRank(const RunModel& run, int rank, const std::string& module) {
  if (const auto* r = run.rankInfo(rank, module)) return r;
  for (const auto& r : run.ranks) {
    if (r.rank == rank && r.module == module) return &r;
  }
  return nullptr;
}

const std::vector<TransferPair>& pairsOf(const RunModel& run, std::vector<TransferPair>& scratch) {
  if (!run.pairs.empty() || run.transfers.empty()) return run.pairs;
  scratch = model::pairTransfers(run.transfers);
  return scratch;
}

int64_t findAction(const RunModel& run, int rank, int iteration, int seq, bool planned) {
  const auto& lists = planned ? run.plan : run.actions;
  if (rank < 0 || static_cast<size_t>(rank) >= lists.size()) return -1;
  const auto& v = lists[rank];
  auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(iteration, seq),
                             [](const events::ActionRecord& a, const std::pair<int, int>& k) {
                               return std::make_pair(a.iteration, a.seq) < k;
                             });
  if (it == v.end() || it->iteration != iteration || it->seq != seq) return -1;
  return it - v.begin();
}

ActionIndex::ActionIndex(const RunModel& run, bool planned)
    : lists_(planned ? &run.plan : &run.actions) {
  starts_.resize(lists_->size());
  for (size_t r = 0; r < lists_->size(); ++r) {
    const auto& list = (*lists_)[r];
    for (size_t i = 0; i < list.size(); ++i)
      if (i == 0 || list[i].iteration != list[i - 1].iteration)
        starts_[r].push_back({list[i].iteration, static_cast<uint32_t>(i)});
  }
}

int64_t ActionIndex::find(int rank, int iteration, int seq) const {
  if (rank < 0 || static_cast<size_t>(rank) >= lists_->size()) return -1;
  const auto& list = (*lists_)[static_cast<size_t>(rank)];
  const auto& starts = starts_[static_cast<size_t>(rank)];
  auto s = std::lower_bound(starts.begin(), starts.end(), iteration,
                            [](const Start& x, int it) { return x.iteration < it; });
  if (s == starts.end() || s->iteration != iteration) return -1;
  const auto first = list.begin() + s->first;
  const auto last = s + 1 == starts.end() ? list.end() : list.begin() + (s + 1)->first;
  auto it = std::lower_bound(first, last, seq,
                             [](const events::ActionRecord& a, int q) { return a.seq < q; });
  if (it == last || it->seq != seq) return -1;
  return it - list.begin();
}

std::span<const events::ActionRecord> iterationRange(const std::vector<events::ActionRecord>& list,
                                                     int iteration) {
  auto lo =
      std::lower_bound(list.begin(), list.end(), iteration,
                       [](const events::ActionRecord& a, int it) { return a.iteration < it; });
  auto hi = std::upper_bound(lo, list.end(), iteration, [](int it, const events::ActionRecord& a) {
    return it < a.iteration;
  });
  return {lo, hi};
}

int sourceStage(const RunModel& run, const TransferRecord& t) {
  const auto* info = findRank(run, t.srcRank, model::edgeModules(t).first);
  if (!info) info = findRank(run, t.srcRank);
  return info ? info->globalStage : -1;
}

}  // namespace stagescope::analysis
