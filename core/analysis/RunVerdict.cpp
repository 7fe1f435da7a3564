#include "core/analysis/RunVerdict.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <vector>

#include "core/analysis/CaptureEnd.h"
#include "core/analysis/HangGraph.h"
#include "core/analysis/RankFate.h"

namespace stagescope::analysis {
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
  bool seenByPeer = false;  // a silent stop some peer's heartbeat watch recorded
  int signal = 0;           // the signal that ended it, as a peer saw it (0: none seen)
};

// Ranks whose last records lie within this of each other stopped together (s): a heartbeat
// interval is 1 s, an action of the suite's configs well under it.
constexpr double kTogetherSeconds = 2.0;

bool hasShard(const model::RunModel& run, int rank) {
  return std::any_of(run.ranks.begin(), run.ranks.end(),
                     [&](const events::RankInfo& r) { return r.rank == rank; });
}

// What the surviving ranks saw of rank `r` through its heartbeats (core/engine/Liveness): the
// first `peer_dead` record that knows the signal that ended it, else the first one, else null.
const events::DiagnosisRecord* seenByPeers(const model::RunModel& run, int r) {
  const events::DiagnosisRecord* best = nullptr;
  for (const auto& d : run.diagnoses) {
    if (d.kind != events::DiagnosisKind::PeerDead || d.waitsOnRank != r) continue;
    if (!best || (d.signal != 0 && best->signal == 0)) best = &d;
  }
  return best;
}

RankEnd endOf(const model::RunModel& run, const ::stagescope::plan::RunConfig& cfg, int r) {
  const std::string who = "rank " + std::to_string(r);
  // What the rank itself (or the launcher) said, by the one rank-fate rule.
  if (const events::DiagnosisRecord* d = decidingRecord(run.diagnoses, r)) {
    const RankFate fate = *fateOf(d->kind);
    return {fate == RankFate::Killed   ? kSignaled
            : fate == RankFate::Failed ? kError
                                       : kWaited,
            rankSays(*d)};
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
  if (wanted == 0 && acts.empty() && !seenByPeers(run, r)) return {};
  const std::string where = acts.empty() ? "before its first action"
                                         : "after " + std::to_string(acts.size()) +
                                               " of its actions (the last in " + "iteration " +
                                               std::to_string(acts.back().iteration) + ")";
  if (const events::DiagnosisRecord* seen = seenByPeers(run, r)) {
    RankEnd e{kSilentStop,
              seen->message + " (seen by rank " + std::to_string(seen->rank) +
                  "); its shard holds " + std::to_string(acts.size()) + " of its actions" +
                  (acts.empty()
                       ? std::string()
                       : " (the last in iteration " + std::to_string(acts.back().iteration) + ")")};
    e.seenByPeer = true;
    e.signal = seen->signal;
    return e;
  }
  return {kSilentStop, who + " stopped " + where +
                           " without a record of why: it was killed by a signal (SIGKILL, the "
                           "OOM killer) or crashed"};
}

// The time of rank r's last recorded action (ns), or -1 when it has none.
int64_t lastRecordNs(const model::RunModel& run, int r) {
  if (r >= static_cast<int>(run.actions.size()) || run.actions[r].empty()) return -1;
  const auto& a = run.actions[r].back();
  return std::max(a.startNs, a.endNs);
}

// When EVERY rank stopped without a record of why and no peer saw another go first, and their
// last records lie within kTogetherSeconds: they were stopped together (a killed launcher takes
// its ranks with it), and naming one of them would blame a bystander.  "" otherwise.
std::string stoppedTogether(const model::RunModel& run, const std::vector<RankEnd>& ends) {
  if (ends.size() < 2) return "";
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  std::string ranks;
  for (const auto& e : ends) {
    if (e.severity != kSilentStop || e.seenByPeer) return "";
    const int64_t t = lastRecordNs(run, e.rank);
    if (t < 0) return "";
    lo = std::min(lo, t);
    hi = std::max(hi, t);
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(e.rank);
  }
  const double spread = static_cast<double>(hi - lo) / 1e9;
  if (spread > kTogetherSeconds) return "";
  char within[32];
  std::snprintf(within, sizeof within, "%.2f", spread);
  return "every rank (" + ranks + ") stopped without a record of why, their last records within " +
         within +
         " s of each other: they were stopped together — their launcher was killed "
         "(its ranks end with it), or the job or machine was stopped; no one rank is the cause";
}

}  // namespace

RunVerdict judgeWorkerRun(const model::RunModel& run, const ::stagescope::plan::RunConfig& cfg) {
  RankEnd first;
  std::vector<RankEnd> ends;
  for (int r = 0; r < cfg.worldSize; ++r) {
    RankEnd e = endOf(run, cfg, r);
    e.rank = r;
    ends.push_back(e);
    if (e.severity < first.severity) first = std::move(e);
  }
  if (first.severity == kCompleted) return {};
  if (const std::string together = stoppedTogether(run, ends); !together.empty()) {
    return {events::RunStatus::Killed, together, -1};
  }
  const bool silent = first.severity == kSilentStop;
  return {first.severity == kWaited ? events::RunStatus::Hung : events::RunStatus::Failed,
          first.reason, silent ? first.rank : -1, silent ? first.signal : 0};
}

}  // namespace stagescope::analysis

namespace stagescope::analysis {
namespace {

// The first failed or timed-out operation a rank recorded (hung / failed), into `*out` with
// its time; false when none.
bool firstFailedOperation(const model::RunModel& m, RunVerdict* out, int64_t* atNs) {
  for (const auto& d : m.diagnoses) {
    if (d.kind == events::DiagnosisKind::Timeout &&
        completedLate(m, d.rank, d.iteration, d.actionSeq)) {
      continue;  // a captured job's operation reported stuck that completed after all
    }
    if (const auto status = statusOfFailedOperation(d.kind)) {
      *out = {*status, rankSays(d), -1};
      *atNs = d.timeNs;
      return true;
    }
  }
  return false;
}

}  // namespace

RunVerdict judgeCapturedRun(const model::RunModel& m, const RunVerdict& stored) {
  const CaptureEnd end = judgeCaptureEnd(m);
  RunVerdict byOps{stored};
  int64_t opNs = 0;
  const bool opFailed = firstFailedOperation(m, &byOps, &opNs);
  if (opFailed && (end.failedRanks.empty() || opNs <= end.firstFailedNs)) return byOps;
  if (end.status != events::RunStatus::Completed) return {end.status, end.reason, -1};
  return stored;
}

}  // namespace stagescope::analysis
