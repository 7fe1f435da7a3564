// `stagescope run --reference`: computes the single-process reference of the configured run,
// in float32 whatever the run's dtype, and stores it in the run file's own reference tables
// (reference_gradients with full values, reference_losses), so `check` can compare every gathered
// gradient with it.
//
// float32 runs: the reference trains its own float32 trajectory from the initial parameters,
// and restarts iteration t from the run's recorded parameters after the step of t-1 wherever
// the file holds them (level full): with Adam, round-off in a gradient that is zero
// analytically (attention key biases) becomes a step of up to lr, so a float32 trajectory
// parts from the run's after one step and later gradients would judge that drift, not the
// engine (a correct random layout failed at 1.2e-3 > 1e-3 in iteration 1).  Where the file holds
// the parameters, check judges the optimizer step itself (core/analysis/OptimizerStep.h).
// bfloat16 runs: the reference of iteration t starts from the run's own parameters at the start
// of t, upcast to float32 (iteration 0: the initial parameters rounded to the run's dtype, as
// every rank holds them; t >= 1: the run's recorded parameters after the step of t-1, which
// carry values at level full), and computes that iteration's gradients in float32 on the same
// global batch.  So each iteration's verdict judges the engine's bfloat16 arithmetic alone, not
// the drift of a float32 trajectory away from the bfloat16 one (docs/analysis.md, "bfloat16").
// An iteration whose starting parameters the file does not hold (below level full, or left out
// by a [record] filter) gets no reference, and a line says so.
#pragma once

#include <string>

#include "core/plan/Config.h"

namespace stagescope::app {

void recordReference(const plan::RunConfig& config, const std::string& runPath);

}  // namespace stagescope::app
