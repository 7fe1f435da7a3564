// The configured optimizer ([optimizer] in the config) over a list of parameter tensors.
// Shared by the executor (local shards) and the reference (full parameters): SGD and Adam
// are elementwise, so a sharded step equals the slice of the full step.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "core/plan/Config.h"

namespace torch::optim {
class Optimizer;
}

namespace stagescope::engine {

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const plan::OptimizerConfig& config,
                                                       std::vector<at::Tensor> params);

}  // namespace stagescope::engine
