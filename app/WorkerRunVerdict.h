// The verdict on a run whose ranks another launcher started (torchrun, Slurm, by hand), made
// by `stagescope merge --config` from what the ranks recorded in their shards.
#pragma once

#include <string>

#include "core/events/Events.h"
#include "core/model/RunModel.h"
#include "core/plan/Config.h"

namespace stagescope::app {

struct WorkerRunVerdict {
  events::RunStatus status = events::RunStatus::Completed;
  std::string reason;  // one line; empty when completed
  // The root cause is this rank, which stopped without a record of why (killed or crashed);
  // -1 otherwise.  `merge` records it as a `rank_killed` diagnosis, as our launcher does.
  int silentRank = -1;
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
WorkerRunVerdict judgeWorkerRun(const model::RunModel& run,
                                const ::stagescope::plan::RunConfig& cfg);

}  // namespace stagescope::app
