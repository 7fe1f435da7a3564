// Creating a new run file for a validated config: the `run` row every consumer reads, written
// once at a path the output policy (OutputPolicy.h) has cleared.  Torch-free: `merge --config`
// uses it in builds without the engine too.
#pragma once

#include <string>

#include "core/events/Events.h"
#include "core/plan/Config.h"

namespace stagescope::app {

// The `run` row of `cfg` written to `out`: run id = the file's name without extension,
// config text and hash, grid, level and filter, versions, start time (Unix ms).
events::RunInfo runInfoFor(const plan::RunConfig& cfg, const std::string& out);

// storage::createRunFile; a run file this call started but could not finish (no space, no
// permission) is removed again, so that the path stays free.  Throws OutputRefused when a file
// appeared at `out` since the policy checked it.
void createNewRunFile(const std::string& out, const events::RunInfo& info);

// Milliseconds since the Unix epoch (the unit of the run row's times).
int64_t unixMs();

}  // namespace stagescope::app
