// `stagescope run --reference`: computes the single-process reference of the configured run,
// in float32 whatever the run's dtype, and stores it in the run file's own reference tables
// (reference_gradients with full values, reference_losses), so `check` can compare every gathered
// gradient with it.
#pragma once

#include <string>

#include "core/plan/Config.h"

namespace stagescope::app {

void recordReference(const plan::RunConfig& config, const std::string& runPath);

}  // namespace stagescope::app
