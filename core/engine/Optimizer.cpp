#include "core/engine/Optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

namespace stagescope::engine {

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const plan::OptimizerConfig& o,
                                                       std::vector<at::Tensor> params) {
  if (o.kind == events::OptimizerKind::Adam) {
    torch::optim::AdamOptions opts(o.lr);
    opts.betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weightDecay);
    return std::make_unique<torch::optim::Adam>(std::move(params), opts);
  }
  torch::optim::SGDOptions opts(o.lr);
  opts.momentum(o.momentum).weight_decay(o.weightDecay);
  return std::make_unique<torch::optim::SGD>(std::move(params), opts);
}

}  // namespace stagescope::engine
