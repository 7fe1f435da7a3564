// One model, one loss scale: the loss-scale rows of a captured job (events/ModuleStep.h,
// written by stagescope_torch.megatron.audited_step), judged per iteration.
//
// With FP16 dynamic loss scaling the language model's last stage multiplies the loss by ITS
// scale and every module unscales its gradients by ITS OWN: they must be one number.  A model
// whose modules own separate scalers (megatron-core 0.19.2's MimoOptimizer: one inner optimizer
// per module grid) keeps them equal only when every scaler is updated from the same, world-wide
// found-inf (Megatron-Bridge PR #5591).  Rules, per iteration in order:
//
//   - every module's `loss_scale` (the scale its backward ran with) is the same, and so is every
//     module's `loss_scale_after` (the next iteration's): the first iteration where they part is
//     a finding naming the module whose scale differs from the language model's and the values;
//   - when any module found Inf/NaN, every module skipped the step: a module that stepped on a
//     step another module found an overflow in is a finding;
//   - an iteration whose step every module skipped for a recorded overflow is an EVENT (a
//     handled overflow), not a failure: the gradients of the modules that found it are exempt
//     from `nonfinite` (handledOverflow).
#pragma once

#include <string>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct LossScaleFinding {
  int iteration = -1;
  std::string module;
  int rank = -1;
  std::string sentence;
};

struct HandledOverflow {
  int iteration = -1;
  std::vector<std::string> modules;  // those whose own check found Inf/NaN
};

struct LossScaleReport {
  int iterations = 0;  // iterations with loss-scale rows
  int modules = 0;     // modules with loss-scale rows
  std::vector<LossScaleFinding> findings;
  std::vector<HandledOverflow> overflows;
  // "loss scale: one scale for N modules in M iterations; 1 overflow handled (iteration 1:
  // vision found Inf/NaN, every module skipped the step)".  Empty when nothing was recorded.
  std::string summary() const;
  // Whether `module`'s gradients of `iteration` hold a handled overflow (see above).
  bool handledOverflow(int iteration, const std::string& module) const;
};

LossScaleReport judgeLossScales(const model::RunModel& run);

}  // namespace stagescope::analysis
