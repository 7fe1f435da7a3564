#include "ui/RankRows.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <tuple>

namespace stagescope::ui {

int RankRow::laneOf(const std::string& module) const {
  if (module.empty() || lanes.size() < 2) return -1;
  for (size_t i = 0; i < lanes.size(); ++i)
    if (lanes[i].module == module) return static_cast<int>(i);
  return -1;
}

std::vector<RankRow> orderRankRows(const model::RunModel& model) {
  const auto& modules = model.info.modules;
  auto moduleIndex = [&](const std::string& name) {
    for (size_t i = 0; i < modules.size(); ++i)
      if (modules[i].name == name) return static_cast<int>(i);
    return -1;
  };
  // First global stage per module, for the group order.
  std::vector<int> firstStage(modules.size(), INT_MAX);
  for (const auto& r : model.ranks) {
    int m = moduleIndex(r.module);
    if (m >= 0) firstStage[m] = std::min(firstStage[m], r.globalStage);
  }
  // One entry per rank: its first row (model.ranks is sorted by rank, then global stage).
  std::vector<const events::RankInfo*> order;
  for (const auto& r : model.ranks)
    if (order.empty() || order.back()->rank != r.rank) order.push_back(&r);
  // A colocated rank forms a group of its own ("shared"), right after its first module's.
  auto groupKey = [&](const events::RankInfo* r) {
    int m = moduleIndex(r->module);
    int stage = m >= 0 ? firstStage[m] : INT_MAX;
    return std::make_tuple(stage, m < 0 ? INT_MAX : m, model.colocated(r->rank) ? 1 : 0);
  };
  std::stable_sort(order.begin(), order.end(), [&](const auto* a, const auto* b) {
    return std::tuple_cat(groupKey(a), std::make_tuple(a->dp, a->pp, a->cp, a->tp, a->rank)) <
           std::tuple_cat(groupKey(b), std::make_tuple(b->dp, b->pp, b->cp, b->tp, b->rank));
  });
  std::vector<RankRow> rows;
  std::tuple<int, int, int> lastGroup{INT_MIN, INT_MIN, INT_MIN};
  for (const auto* r : order) {
    RankRow row;
    row.rank = r->rank;
    row.moduleIndex = moduleIndex(r->module);
    row.firstOfModule = groupKey(r) != lastGroup;
    lastGroup = groupKey(r);
    char buf[160];
    for (const auto& m : model.modulesOf(r->rank)) {
      std::snprintf(buf, sizeof buf, "%s tp%d pp%d dp%d", m.module.empty() ? "?" : m.module.c_str(),
                    m.tp, m.pp, m.dp);
      row.lanes.push_back({moduleIndex(m.module), m.module, buf});
    }
    if (row.shared())
      std::snprintf(buf, sizeof buf, "r%d  %s", r->rank, model.moduleLabel(r->rank).c_str());
    else
      std::snprintf(buf, sizeof buf, "%s  tp%d pp%d dp%d  r%d",
                    r->module.empty() ? "?" : r->module.c_str(), r->tp, r->pp, r->dp, r->rank);
    row.label = buf;
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<int> rowOfRank(const std::vector<RankRow>& rows, int worldSize) {
  std::vector<int> out(std::max(0, worldSize), -1);
  for (size_t i = 0; i < rows.size(); ++i) {
    int r = rows[i].rank;
    if (r >= 0 && r < worldSize) out[r] = static_cast<int>(i);
  }
  return out;
}

}  // namespace stagescope::ui
