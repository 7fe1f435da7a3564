// The independent single-process reference: the same model, unsharded (tp = pp = dp = 1 per
// module), composed sequentially in one process over the whole global batch, with the same
// layout-independent weights and data.  Loss = mean over the global batch of the microbatch
// losses (equal-sized microbatches, so the mean over all text tokens).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "core/plan/Config.h"

namespace stagescope::engine {

struct ReferenceIteration {
  double loss = 0;                              // global-batch mean
  std::vector<double> microbatchLosses;         // [microbatch * dp_llm + replica]
  std::map<std::string, at::Tensor> gradients;  // full parameter name -> full gradient
  std::map<std::string, at::Tensor> paramsAfterStep;
};

// The global batch of one iteration in sample order: tokens [B, T+1] (int64) and, per
// encoder, patches [B, P, d]; B = microbatches * micro_batch_size * dp_llm.
struct GlobalBatch {
  at::Tensor tokens;
  std::map<std::string, at::Tensor> patches;
};
GlobalBatch generatedBatch(const plan::RunConfig& config, int iteration);

// One training step of the full model from the given full initial parameters (by name;
// missing names are generated) on the given batch: what an independent program recomputes
// from a run file recorded at level full.
ReferenceIteration referenceStep(const plan::RunConfig& config,
                                 const std::map<std::string, at::Tensor>& params,
                                 const GlobalBatch& batch);

// Runs `iterations` training iterations (or forward-only when the config says so).  Where
// `restartFrom` holds full parameters for iteration t-1 (by name, every parameter), iteration t
// starts from them instead of the reference's own step of t-1; the optimizer keeps its own state
// (a gradient depends only on the parameters it is computed at).  Empty: the reference's own
// trajectory throughout.
using FullParams = std::map<std::string, at::Tensor>;
std::vector<ReferenceIteration> runReference(const plan::RunConfig& config, int iterations,
                                             const std::map<int, FullParams>& restartFrom = {});

// Initial full parameters by name (what every layout starts from).
std::map<std::string, at::Tensor> referenceInitialParams(const plan::RunConfig& config);

}  // namespace stagescope::engine
