// A uniform ratio between two runs' gradients of one module (docs/analysis.md "Uniform gradient
// ratios"): every parameter of the module, in one iteration, has A's gradient norm = r × B's
// with the same r.  A scale error — a loss scale, a missing 1/dp, an average where a sum was
// meant — moves a whole module's gradients by one factor; naming r is the diagnosis, where a
// list of per-parameter differences is only its symptom.
//
// Where both runs carry their layouts (a stagescope config, or a captured job's declared one),
// the ratio is set against the data-parallel factor of docs/schedule.md §7.1: an encoder whose
// gradients are averaged over its own dp size d_E (the original's reduction) instead of summed
// and divided by the language model's d_L is off by d_L/d_E; when r equals the two layouts'
// factors' quotient, it is named as §7.1.  Evidence: norms (the ratio of magnitudes; the
// directions are judged by the comparison itself).  Torch-free.
#pragma once

#include <string>
#include <vector>

#include "core/analysis/Compare.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct UniformRatio {
  std::string module;
  int iteration = -1;
  double ratio = 1;   // A's norm / B's norm, the mean over the module's parameters
  double spread = 0;  // max / min of the per-parameter ratios, minus one
  int parameters = 0;
  double expected = -1;  // (d_L/d_E of A) / (d_L/d_E of B) when both layouts are known, else -1
  std::string sentence;  // one sentence naming it (and §7.1 where it matches)
};

// The ratios of `rows` (every aligned gradient, both sides present) that are uniform over a
// module's parameters (spread ≤ 1e-3) and not 1 (|r − 1| > 1e-3), per (module, iteration).
// A module is a parameter name's first dotted component.
std::vector<UniformRatio> uniformGradientRatios(const std::vector<GradRow>& rows,
                                                const model::RunModel& a, const model::RunModel& b);

}  // namespace stagescope::analysis
