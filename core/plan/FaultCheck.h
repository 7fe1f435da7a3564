// Faults that can never fire are configuration errors: a fault that matches no planned send
// (or, for kill, no planned compute) would silently do nothing and the run would "pass".
// Torch-free; called by parseConfig once the rest of the config is valid.
#pragma once

#include "core/plan/Config.h"
#include "core/plan/Plan.h"

namespace stagescope::plan {

// Throws ConfigError "<source>: faults[i] = <fault>: can never fire: <why>; <what would>"
// for the first fault of `config` that matches nothing in `plan` (the plan of `config`).
// A transfer fault (delay, drop, corrupt, shape, nan, inf) fires when a rank it applies to
// (`rank`, else every rank of `module` at pp index `stage`) has a planned send of its
// `direction` and `microbatch`; a kill fires when such a rank computes that microbatch
// (forward for direction activation, backward for gradient).  The plan repeats every
// iteration, and the iteration range is checked by parseConfig.
void checkFaultsCanFire(const RunConfig& config, const Plan& plan);

}  // namespace stagescope::plan
