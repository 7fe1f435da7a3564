#include "app/WorkerRunVerdict.h"

#include <algorithm>

namespace stagescope::app {
namespace {

// Severity of how a rank ended: lower is closer to the root cause.  A rank that stopped
// without a record of its own (SIGKILL, the OOM killer, a crash) comes first; then one that
// recorded an unexplained signal (SIGTERM with every peer alive), then an error; ranks that
// waited on, lost, or were stopped after another rank are consequences.
enum Severity {
  kSilentStop = 0,
  kSignaled = 1,
  kError = 2,
  kWaited = 3,
  kNoShard = 4,
  kCompleted = 5
};

struct RankEnd {
  Severity severity = kCompleted;
  std::string reason;
  int rank = -1;
};

bool hasShard(const model::RunModel& run, int rank) {
  return std::any_of(run.ranks.begin(), run.ranks.end(),
                     [&](const events::RankInfo& r) { return r.rank == rank; });
}

// What the surviving ranks saw of rank `r` through its heartbeats (core/engine/Liveness): the
// first `peer_dead` sentence that names a signal, else the first one, else "".
std::string seenByPeers(const model::RunModel& run, int r) {
  const events::DiagnosisRecord* best = nullptr;
  for (const auto& d : run.diagnoses) {
    if (d.kind != "peer_dead" || d.waitsOnRank != r) continue;
    const bool signal = d.message.find("killed by signal") != std::string::npos;
    if (!best || (signal && best->message.find("killed by signal") == std::string::npos)) best = &d;
  }
  return best ? best->message + " (seen by rank " + std::to_string(best->rank) + ")" : "";
}

RankEnd endOf(const model::RunModel& run, const ::stagescope::plan::RunConfig& cfg, int r) {
  const std::string who = "rank " + std::to_string(r);
  for (const auto& d : run.diagnoses) {  // what the rank itself said
    if (d.rank == r && d.kind == "rank_killed") return {kSignaled, who + " " + d.message};
  }
  for (const auto& d : run.diagnoses) {
    if (d.rank != r) continue;
    if (d.kind == "error" || d.kind == "config_mismatch" || d.kind == "network")
      return {kError, who + ": " + d.message};
  }
  for (const auto& d : run.diagnoses) {
    if (d.rank == r && (d.kind == "timeout" || d.kind == "peer_lost"))
      return {kWaited, who + ": " + d.message};
    if (d.rank == r && d.kind == "rank_stopped") return {kWaited, who + " " + d.message};
  }
  if (!hasShard(run, r)) return {kNoShard, who + ": no shard was merged for it"};
  const size_t planned = r < static_cast<int>(run.plan.size()) ? run.plan[r].size() : 0;
  const auto& acts = r < static_cast<int>(run.actions.size()) ? run.actions[r]
                                                              : std::vector<events::ActionRecord>{};
  const auto modules = cfg.modulesOfRank(r);
  int wanted = 0, started = 0;
  for (int it = 0; it < cfg.iterations; ++it) {
    bool any = false;
    for (const auto* module : modules) any = any || cfg.record.wants(it, module->name, r);
    wanted += any ? 1 : 0;
  }
  for (size_t k = 0; k < planned; ++k)
    started += k == 0 || run.plan[r][k].iteration != run.plan[r][k - 1].iteration ? 1 : 0;
  if (planned > 0 && acts.size() >= planned && started >= wanted) return {};
  // A rank the [record] filter keeps in no iteration records no plan and no action by design:
  // its merged shard, no error or timeout of its own (above) and no peer that saw it stop are
  // all the records can say, and they say it finished.
  if (wanted == 0 && acts.empty() && seenByPeers(run, r).empty()) return {};
  const std::string where = acts.empty() ? "before its first action"
                                         : "after " + std::to_string(acts.size()) +
                                               " of its actions (the last in " + "iteration " +
                                               std::to_string(acts.back().iteration) + ")";
  const std::string seen = seenByPeers(run, r);
  if (!seen.empty()) {
    return {kSilentStop,
            seen + "; its shard holds " + std::to_string(acts.size()) + " of its actions" +
                (acts.empty()
                     ? std::string()
                     : " (the last in iteration " + std::to_string(acts.back().iteration) + ")")};
  }
  return {kSilentStop, who + " stopped " + where +
                           " without a record of why: it was killed by a signal (SIGKILL, the "
                           "OOM killer) or crashed"};
}

}  // namespace

WorkerRunVerdict judgeWorkerRun(const model::RunModel& run,
                                const ::stagescope::plan::RunConfig& cfg) {
  RankEnd first;
  for (int r = 0; r < cfg.worldSize; ++r) {
    RankEnd e = endOf(run, cfg, r);
    e.rank = r;
    if (e.severity < first.severity) first = std::move(e);
  }
  if (first.severity == kCompleted) return {};
  return {first.severity == kWaited ? events::RunStatus::Hung : events::RunStatus::Failed,
          first.reason, first.severity == kSilentStop ? first.rank : -1};
}

}  // namespace stagescope::app
