#include "app/report/TraceContext.h"

#include <algorithm>

#include "core/events/Limits.h"

namespace stagescope::report {

ProcessIds::ProcessIds(const model::RunModel& run) : run_(run) {
  for (size_t i = 0; i < run.info.modules.size(); ++i) {
    pid_[run.info.modules[i].name] = static_cast<int>(i) + 1;
  }
}

int ProcessIds::ofRank(int rank) {
  if (rank >= 0 && static_cast<size_t>(rank) < cache_.size() && cache_[rank] > 0)
    return cache_[rank];
  const auto* info = analysis::findRank(run_, rank);
  std::string m = info ? info->module : "";
  auto it = pid_.find(m);
  if (it == pid_.end()) it = pid_.emplace(m, static_cast<int>(pid_.size()) + 1).first;
  if (rank >= 0 && rank <= events::limits::kMaxWorldSize) {
    if (static_cast<size_t>(rank) >= cache_.size()) cache_.resize(rank + 1, 0);
    cache_[rank] = it->second;
  }
  return it->second;
}

TraceContext::TraceContext(const model::RunModel& r) : run(r), pids(r), actionIndex(r) {
  for (const auto& list : run.actions) {
    for (const auto& a : list) {
      t0 = std::min(t0, a.startNs);
      tEnd = std::max(tEnd, a.endNs);
    }
  }
  for (const auto& c : run.collectives) {
    if (c.startNs != 0) t0 = std::min(t0, c.startNs);
    tEnd = std::max({tEnd, c.startNs, c.endNs});
  }
  if (t0 == INT64_MAX) t0 = 0;
  spans = actionSpans(run);
  collectives = collectiveSlices(run, tEnd);
}

const Span* TraceContext::spanOfAction(const events::TransferRecord& t) const {
  const int64_t ai = actionIndex.find(t.rank, t.iteration, t.actionSeq);
  return ai >= 0 ? &spans[static_cast<size_t>(t.rank)][static_cast<size_t>(ai)] : nullptr;
}

}  // namespace stagescope::report
