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
  double loss = 0;                               // global-batch mean
  std::vector<double> microbatchLosses;          // [microbatch * dp_llm + replica]
  std::map<std::string, at::Tensor> gradients;   // full parameter name -> full gradient
  std::map<std::string, at::Tensor> paramsAfterStep;
};

// Runs `iterations` training iterations (or forward-only when the config says so).
std::vector<ReferenceIteration> runReference(const plan::RunConfig& config, int iterations);

// Initial full parameters by name (what every layout starts from).
std::map<std::string, at::Tensor> referenceInitialParams(const plan::RunConfig& config);

}  // namespace stagescope::engine
