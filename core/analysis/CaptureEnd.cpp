#include "core/analysis/CaptureEnd.h"

#include <algorithm>
#include <map>

#include "core/events/DiagnosisKind.h"

namespace stagescope::analysis {

namespace {

std::string rankList(const std::vector<int32_t>& ranks, size_t shown) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < shown; ++i)
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > shown) out += " and " + std::to_string(ranks.size() - shown) + " more";
  return out;
}

}  // namespace

CaptureEnd judgeCaptureEnd(const model::RunModel& m) {
  std::map<int32_t, const events::DiagnosisRecord*> failed;  // rank -> its earliest rank_failed
  std::vector<bool> ended(static_cast<size_t>(std::max(0, m.info.worldSize)), false);
  for (const auto& d : m.diagnoses) {
    if (d.rank < 0 || d.rank >= m.info.worldSize) continue;
    if (d.kind == events::DiagnosisKind::RankEnd) ended[static_cast<size_t>(d.rank)] = true;
    if (d.kind == events::DiagnosisKind::RankFailed) {
      auto& slot = failed[d.rank];
      if (!slot || d.timeNs < slot->timeNs) slot = &d;
    }
  }
  CaptureEnd out;
  std::vector<const events::DiagnosisRecord*> byTime;
  for (const auto& [rank, d] : failed) byTime.push_back(d);
  std::stable_sort(byTime.begin(), byTime.end(),
                   [](const auto* a, const auto* b) { return a->timeNs < b->timeNs; });
  for (const auto* d : byTime) out.failedRanks.push_back(d->rank);
  if (!byTime.empty()) out.firstFailedNs = byTime.front()->timeNs;
  for (int32_t r = 0; r < m.info.worldSize; ++r)
    if (!ended[static_cast<size_t>(r)] && !failed.count(r)) out.silentRanks.push_back(r);

  std::string silent;
  if (!out.silentRanks.empty()) {
    silent = "rank" + std::string(out.silentRanks.size() > 1 ? "s " : " ") +
             rankList(out.silentRanks, 8) +
             " recorded no end (killed by a signal, or aborted before the shard was written)";
  }
  if (!byTime.empty()) {
    out.status = events::RunStatus::Failed;
    out.reason = byTime.front()->message;
    if (byTime.size() > 1)
      out.reason += "; also failed: rank" + std::string(byTime.size() > 2 ? "s " : " ") +
                    rankList({out.failedRanks.begin() + 1, out.failedRanks.end()}, 8);
    if (!silent.empty()) out.reason += "; " + silent;
  } else if (!out.silentRanks.empty()) {
    out.status = events::RunStatus::Killed;
    out.reason = silent;
  }
  return out;
}

}  // namespace stagescope::analysis
