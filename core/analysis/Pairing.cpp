#include "core/analysis/Pairing.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace stagescope::analysis {

using events::Side;
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

std::vector<TransferPair> pairTransfers(const std::vector<TransferRecord>& t) {
  std::vector<size_t> order(t.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto key = [&](size_t i) {
    const auto& r = t[i];
    return std::tie(r.edge, r.direction, r.iteration, r.microbatch, r.srcRank, r.dstRank);
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::vector<TransferPair> pairs;
  pairs.reserve(t.size() / 2 + 1);
  size_t i = 0;
  while (i < order.size()) {
    size_t j = i;
    while (j < order.size() && key(order[j]) == key(order[i])) ++j;
    std::vector<size_t> sends, recvs;
    for (size_t k = i; k < j; ++k) {
      (t[order[k]].side == Side::Send ? sends : recvs).push_back(order[k]);
    }
    size_t n = std::max(sends.size(), recvs.size());
    for (size_t k = 0; k < n; ++k) {
      TransferPair p;
      if (k < sends.size()) p.send = static_cast<int64_t>(sends[k]);
      if (k < recvs.size()) p.recv = static_cast<int64_t>(recvs[k]);
      if (p.send >= 0 && p.recv >= 0) {
        const auto& s = t[p.send];
        const auto& r = t[p.recv];
        p.shapeMatches = s.shape == r.shape;  // as the reader pairs them (storage/RunReader)
        p.dtypeMatches = s.dtype == r.dtype;
        p.checksumMatches = !(s.checksum != 0 && r.checksum != 0 && s.checksum != r.checksum);
      }
      pairs.push_back(p);
    }
    i = j;
  }
  std::sort(pairs.begin(), pairs.end(), [](const TransferPair& a, const TransferPair& b) {
    int64_t x = a.send >= 0 ? a.send : a.recv;
    int64_t y = b.send >= 0 ? b.send : b.recv;
    return x < y;
  });
  return pairs;
}

const std::vector<TransferPair>& pairsOf(const RunModel& run, std::vector<TransferPair>& scratch) {
  if (!run.pairs.empty() || run.transfers.empty()) return run.pairs;
  scratch = pairTransfers(run.transfers);
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
