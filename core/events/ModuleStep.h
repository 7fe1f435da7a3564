// What one module's optimizer step on one rank assumed about the numbers: the loss
// normalisation its data-parallel reduction applied, and its loss scale with its found-inf and
// skip decision.  Recorded by a captured job's helpers (stagescope_torch.megatron:
// audited_finalize, audited_step), judged by core/analysis/GradientAudit (the reduction) and
// core/analysis/LossScale (one scale for the whole model).
//
// A helper that knows only one half writes a row with the other half unset (-1 / NaN /
// Unknown); several rows of one (rank, iteration, module) add up, the analyses take each field
// from the row that set it.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "core/events/Name.h"

namespace stagescope::events {

// How a module's reduction normalises the loss it was computed from (Megatron's
// calculate_per_token_loss of the module's own config): Mean = each microbatch's loss is a
// mean, divided by the microbatches in the schedule and by the data-parallel size in the
// reduction; PerToken = a sum over tokens, divided once by the global token count.
enum class LossNormalisation : uint8_t { Unknown = 0, Mean, PerToken };
const char* toString(LossNormalisation n);  // "unknown" | "mean" | "per_token"
bool parseLossNormalisation(const std::string& text, LossNormalisation* out);

struct ModuleStepRecord {
  int32_t rank = -1;
  int32_t iteration = -1;
  Name module;
  int32_t dp = -1;  // the rank's data-parallel replica index in `module` (-1: not known)
  // The reduction (one row per module replica, written around finalize_model_grads).
  LossNormalisation normalisation = LossNormalisation::Unknown;
  int32_t microbatches = -1;  // microbatches of the iteration
  int64_t tokens = -1;        // tokens this replica's loss counted (the llm's last stage)
  int64_t globalTokens = -1;  // the global count a per-token reduction divides by
  // The loss scale (one row per module replica, written around the optimizer step).
  double lossScale = NAN;       // the scale this iteration's backward ran with
  double lossScaleAfter = NAN;  // the scale after this step's scaler update (the next one's)
  int8_t foundInf = -1;         // 1: the module's own check found Inf/NaN; 0: none; -1 unset
  int8_t skipped = -1;          // 1: the optimizer step was skipped; 0: taken; -1 unset
  bool hasReduction() const { return normalisation != LossNormalisation::Unknown; }
  bool hasLossScale() const { return std::isfinite(lossScale) || foundInf >= 0; }
};

}  // namespace stagescope::events
