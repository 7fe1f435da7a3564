// check's judgement of the optimizer step (part of reference_gradient, level full).
//
// The float32 reference restarts each iteration from the run's own recorded parameters
// (app/ReferenceRecord.h), so its gradients no longer carry a wrong step into the next
// iteration: the step is judged here instead, on its own.  For every iteration t and parameter
// the file holds whole with values, the configured optimizer ([optimizer]: SGD with momentum and
// weight decay, or Adam) is applied, in float32 as the ranks step, to the run's own parameters
// before the step (`param_initial` for t = 0, `param_after_step` of t-1 after) with the run's
// own reduced gradient of t, and the result is compared with the recorded `param_after_step`
// of t, element by element.
//
// The bound of each element is 2^-21 x max(1, max |p|) (four float32 ulps of a parameter of
// magnitude 1; a wrong lr, a missed or doubled step move a parameter by about lr) plus four times
// a first-order bound on how far float32 rounding of this step's own inputs can move it.  That
// second term matters where Adam divides by a gradient that cancelled to a few ulps (weight decay
// g + wd*p ~ 0): there the update is sensitive to the last bit of g, and another order of the
// same float32 operations lands elsewhere (docs/analysis.md, "The optimizer step").
//
// Adam and SGD with momentum carry state: a parameter whose gradient or parameters of some
// iteration are not in the file (a [record] filter, level below full) is not judged from then on.
// bfloat16/float16 runs are not judged (their update is often below the parameter's spacing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct StepMismatch {
  int iteration = -1;
  std::string param;
  int64_t element = -1;  // the element furthest outside its bound (row-major)
  double got = 0, expected = 0, bound = 0;
  int64_t outside = 0;  // elements outside their bound
};

struct StepJudgement {
  bool judged = false;  // false: why says why no step was judged
  std::string why;
  std::string optimizer;  // "adam lr 0.05 ..." for the summary
  int steps = 0;          // (iteration, parameter) steps compared
  int notJudged = 0;      // steps whose inputs or optimizer state the file does not hold
  std::vector<StepMismatch> mismatches;
};

StepJudgement judgeOptimizerSteps(const model::RunModel& run);

}  // namespace stagescope::analysis
