#include "core/model/RunModel.h"

#include <algorithm>
#include <functional>
#include <tuple>

namespace stagescope::model {

std::span<const events::RankInfo> RunModel::modulesOf(int rank) const {
  auto lo = std::lower_bound(ranks.begin(), ranks.end(), rank,
                             [](const events::RankInfo& r, int v) { return r.rank < v; });
  auto hi = lo;
  while (hi != ranks.end() && hi->rank == rank) ++hi;
  return {lo, hi};
}

const events::RankInfo* RunModel::rankInfo(int rank) const {
  // Fast path: one row per rank and every rank present.
  if (rank >= 0 && static_cast<size_t>(rank) < ranks.size() && ranks[rank].rank == rank &&
      (rank == 0 || ranks[rank - 1].rank != rank))
    return &ranks[rank];
  auto rows = modulesOf(rank);
  return rows.empty() ? nullptr : &rows.front();
}

const events::RankInfo* RunModel::rankInfo(int rank, const std::string& module) const {
  for (const auto& r : modulesOf(rank))
    if (r.module == module) return &r;
  return nullptr;
}

const events::RankInfo* RunModel::placementOf(const events::ActionRecord& a) const {
  if (!a.module.empty())
    if (const auto* r = rankInfo(a.rank, a.module)) return r;
  return rankInfo(a.rank);
}

const events::RankInfo* RunModel::placementOf(const events::TransferRecord& t) const {
  const auto [src, dst] = edgeModules(t);
  const bool send = t.side == events::Side::Send;
  if (const auto* r = rankInfo(t.rank, send ? src : dst)) return r;
  return rankInfo(t.rank);
}

std::string RunModel::moduleLabel(int rank) const {
  std::string s;
  for (const auto& r : modulesOf(rank)) s += (s.empty() ? "" : "+") + r.module;
  return s;
}

int RunModel::rankCount() const {
  int n = 0;
  for (size_t i = 0; i < ranks.size(); ++i) n += i == 0 || ranks[i].rank != ranks[i - 1].rank;
  return n;
}

size_t RunModel::eventCount() const {
  size_t n = transfers.size() + gradients.size() + gradientsNotLoaded + losses.size();
  for (const auto& a : actions) n += a.size();
  return n;
}

void sortRankRows(std::vector<events::RankInfo>& rows,
                  const std::vector<events::ModuleInfo>& modules) {
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return std::tie(a.rank, a.module) < std::tie(b.rank, b.module);
  });
  std::vector<events::RankInfo> unique;
  for (auto& r : rows) {
    if (!unique.empty() && unique.back().rank == r.rank && unique.back().module == r.module)
      unique.back() = std::move(r);
    else
      unique.push_back(std::move(r));
  }
  auto order = [&](const std::string& name) {
    for (size_t i = 0; i < modules.size(); ++i)
      if (modules[i].name == name) return static_cast<int>(i);
    return static_cast<int>(modules.size());
  };
  std::sort(unique.begin(), unique.end(), [&](const auto& a, const auto& b) {
    return std::make_tuple(a.rank, a.globalStage, order(a.module), std::cref(a.module)) <
           std::make_tuple(b.rank, b.globalStage, order(b.module), std::cref(b.module));
  });
  rows = std::move(unique);
}

std::pair<std::string, std::string> edgeModules(const events::TransferRecord& t) {
  if (t.edgeKind == events::EdgeKind::P2P) {
    std::string m = t.edge.substr(0, t.edge.find(':'));
    return {m, m};
  }
  auto arrow = t.edge.find("->");
  if (arrow == std::string::npos) return {t.edge, t.edge};
  return {t.edge.substr(0, arrow), t.edge.substr(arrow + 2)};
}

}  // namespace stagescope::model
