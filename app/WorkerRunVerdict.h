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
};

// Root cause first, as `stagescope run` orders it: a rank that stopped before finishing its
// plan without recording why (killed by a signal such as SIGKILL, or the OOM killer: neither
// leaves a record) outranks a rank that recorded an error (config mismatch, network, any
// exception), which outranks ranks that timed out or lost a peer (consequences: hung).  A
// rank with no merged shard comes last.  Among equals, the lowest rank.  A rank completed
// when it started every iteration its record filter keeps and executed every planned action.
WorkerRunVerdict judgeWorkerRun(const model::RunModel& run,
                                const ::stagescope::plan::RunConfig& cfg);

}  // namespace stagescope::app
