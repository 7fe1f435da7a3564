// What the run file says about a layout: the `modules` rows of a config and the `ranks` rows of
// a plan (docs/run-file.md).  One home for both, used by stagescope's own runs (app/) and by a
// captured job that declared its layout (app/capture): the same layout reads the same in the
// viewer, check and export whoever recorded it.
#pragma once

#include <vector>

#include "core/events/Events.h"
#include "core/plan/Config.h"
#include "core/plan/Plan.h"

namespace stagescope::plan {

// One `modules` row per configured module; an encoder feeds the LLM.
std::vector<events::ModuleInfo> moduleInfos(const RunConfig& cfg);

// The resolved settings the run file records for the read side (events::RunSettings): the one
// function that fills them, at record time (app/RunFileCreation) and, for a file recorded
// before they existed, from its stored config text (core/analysis/RunSetup).
events::RunSettings runSettings(const RunConfig& cfg);

// One `ranks` row per (rank, module) the rank holds (a colocated rank has several), with the
// plan's global stage and warmup.  host, device and pid are left for the caller.
std::vector<events::RankInfo> rankInfos(const RankPlan& rank, const Plan& plan);

}  // namespace stagescope::plan
