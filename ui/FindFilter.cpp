#include "ui/FindFilter.h"

namespace stagescope::ui {

std::vector<FindHit> findItems(const storage::RunModel& model, const FindQuery& q, size_t limit,
                               size_t* total) {
  std::vector<FindHit> out;
  size_t count = 0;
  auto add = [&](int32_t rank, int64_t index) {
    ++count;
    if (out.size() < limit) out.push_back({q.what, rank, index});
  };
  auto moduleOf = [&](int rank) -> const std::string& {
    static const std::string none;
    return rank >= 0 && rank < static_cast<int>(model.ranks.size()) ? model.ranks[rank].module
                                                                    : none;
  };
  switch (q.what) {
    case FindWhat::Actions:
      for (size_t r = 0; r < model.actions.size(); ++r) {
        if (q.rank >= 0 && q.rank != static_cast<int>(r)) continue;
        if (!q.module.empty() && moduleOf(static_cast<int>(r)) != q.module) continue;
        if (q.nanInf || q.mismatch) continue;
        const auto& acts = model.actions[r];
        for (size_t i = 0; i < acts.size(); ++i) {
          const auto& a = acts[i];
          if (q.iteration >= 0 && a.iteration != q.iteration) continue;
          if (q.microbatch >= 0 && a.microbatch != q.microbatch) continue;
          if (q.kind >= 0 && static_cast<int>(a.kind) != q.kind) continue;
          add(static_cast<int32_t>(r), static_cast<int64_t>(i));
        }
      }
      break;
    case FindWhat::Transfers: {
      std::vector<char> mismatched;
      if (q.mismatch) {
        mismatched.assign(model.transfers.size(), 0);
        for (const auto& p : model.pairs) {
          if (p.checksumMatches && p.shapeMatches) continue;
          if (p.send >= 0) mismatched[p.send] = 1;
          if (p.recv >= 0) mismatched[p.recv] = 1;
        }
      }
      for (size_t i = 0; i < model.transfers.size(); ++i) {
        const auto& t = model.transfers[i];
        if (q.rank >= 0 && t.srcRank != q.rank && t.dstRank != q.rank) continue;
        if (!q.module.empty() && moduleOf(t.srcRank) != q.module && moduleOf(t.dstRank) != q.module)
          continue;
        if (q.iteration >= 0 && t.iteration != q.iteration) continue;
        if (q.microbatch >= 0 && t.microbatch != q.microbatch) continue;
        if (q.kind >= 0 && static_cast<int>(t.direction) != q.kind) continue;
        if (q.nanInf && !(t.hasStats && (t.stats.nanCount || t.stats.infCount))) continue;
        if (q.mismatch && !mismatched[i]) continue;
        add(t.rank, static_cast<int64_t>(i));
      }
      break;
    }
    case FindWhat::Gradients:
      if (q.mismatch) break;
      for (size_t i = 0; i < model.gradients.size(); ++i) {
        const auto& g = model.gradients[i];
        if (q.rank >= 0 && g.rank != q.rank) continue;
        if (!q.module.empty() && g.module != q.module) continue;
        if (q.iteration >= 0 && g.iteration != q.iteration) continue;
        if (q.microbatch >= 0 && g.microbatch != q.microbatch) continue;
        if (q.kind >= 0 && static_cast<int>(g.phase) != q.kind) continue;
        if (q.nanInf && !(g.hasStats && (g.stats.nanCount || g.stats.infCount))) continue;
        add(g.rank, static_cast<int64_t>(i));
      }
      break;
  }
  if (total) *total = count;
  return out;
}

}  // namespace stagescope::ui
