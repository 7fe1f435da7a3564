// A run's status judged from what its ranks recorded: the one run-status rule `merge` calls
// (a run file it creates or re-judges), over the one rank-fate rule (RankFate.h).  Reads the
// plan, actions and diagnoses only: not the transfers and gradients (~90 % of a big run's rows).
#pragma once

#include <string>

#include "core/events/Events.h"
#include "core/model/RunModel.h"
#include "core/plan/Config.h"

namespace stagescope::analysis {

struct RunVerdict {
  events::RunStatus status = events::RunStatus::Completed;
  std::string reason;  // one line; empty when completed
  // The root cause is this rank, which stopped without a record of why (killed or crashed);
  // -1 otherwise.  `merge` records it as a `rank_killed` diagnosis, as our launcher does.
  int silentRank = -1;
  // The signal that ended `silentRank` as its peers saw it (a peer_dead record's signal); 0 when
  // none was seen.  That rank_killed diagnosis carries it (DiagnosisRecord::signal).
  int silentSignal = 0;
};

// Root cause first, as `stagescope run` orders it: a rank that stopped before finishing its
// plan without recording why (killed by a signal such as SIGKILL, or the OOM killer: neither
// leaves a record) outranks a rank that recorded an unexplained signal (`rank_killed`: SIGTERM
// while its peers were alive), which outranks a rank that recorded an error (config mismatch,
// network, any exception), which outranks ranks that timed out, lost a peer or were stopped
// after it (consequences: hung).  A rank with no merged shard comes last.  Among equals, the
// lowest rank.  A silent rank is described by what the survivors saw of its heartbeats
// (`peer_dead`: host, pid, last heartbeat and action, process gone, the signal when known).  A rank
// completed when it started every iteration its record filter keeps and executed every planned
// action.
// A run of stagescope's own (`run`, or ranks another launcher started: torchrun, Slurm, by
// hand) judged against its plan.
RunVerdict judgeWorkerRun(const model::RunModel& run, const ::stagescope::plan::RunConfig& cfg);

// A captured PyTorch job (app/capture), which has no plan of its own.  Every rank must have
// recorded how it ended (judgeCaptureEnd); what came first decides: an operation that failed or
// timed out before any rank raised (the job then raised c10d's error: a consequence), or a rank
// that raised first (its peers' failed operations are the consequences).  A timeout whose
// operation completed after all (late_completion) decides nothing.  `stored`: what rank 0
// wrote at its own exit, kept when the records say no more.
RunVerdict judgeCapturedRun(const model::RunModel& run, const RunVerdict& stored);

}  // namespace stagescope::analysis
