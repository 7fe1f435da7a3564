// Megatron-style tensor-parallel autograd boundaries over a c10d group.
//   copyToTensorParallel:   identity forward, all-reduce (sum) of the gradient backward
//                           (the "f" operator on a column-parallel layer's input);
//   reduceFromTensorParallel: all-reduce (sum) forward, identity backward
//                           (the "g" operator after a row-parallel layer).
// A null group (tp = 1) makes both plain identities.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>

#include "core/engine/ProcessGroups.h"

namespace stagescope::engine {

// Blocking in-place sum all-reduce with the group's timeout; throws naming the group.
void allReduceSum(const Group& group, at::Tensor& t, std::chrono::milliseconds timeout);

at::Tensor copyToTensorParallel(const at::Tensor& x, const std::shared_ptr<Group>& group,
                                std::chrono::milliseconds timeout);
at::Tensor reduceFromTensorParallel(const at::Tensor& x, const std::shared_ptr<Group>& group,
                                    std::chrono::milliseconds timeout);

}  // namespace stagescope::engine
