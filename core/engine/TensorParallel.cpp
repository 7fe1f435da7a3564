#include "core/engine/TensorParallel.h"

#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>

namespace stagescope::engine {

void allReduceSum(const Group& group, at::Tensor& t, std::chrono::milliseconds timeout) {
  if (!group.backend) return;
  // Gloo reduces host tensors; a CUDA tensor is staged through host memory and copied back.
  if (!t.device().is_cpu() && group.backend->getBackendName() == "gloo") {
    at::Tensor host = t.to(at::kCPU).contiguous();
    allReduceSum(group, host, timeout);
    t.copy_(host);
    return;
  }
  std::vector<at::Tensor> v{t};
  auto work = group.backend->allreduce(v);
  try {
    work->wait(timeout);
  } catch (const std::exception& e) {
    throw std::runtime_error("all-reduce in group " + group.name + " did not finish within " +
                             std::to_string(timeout.count()) + " ms: " + e.what());
  }
}

namespace {

// Group and timeout travel through the autograd context as a raw pointer held in an int64:
// the group outlives every graph built during the step (it lives in ProcessGroups).
struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            int64_t group, int64_t timeoutMs) {
    ctx->saved_data["g"] = group;
    ctx->saved_data["t"] = timeoutMs;
    return x.view_as(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* g = reinterpret_cast<const Group*>(ctx->saved_data["g"].toInt());
    at::Tensor grad = grads[0].contiguous().clone();
    allReduceSum(*g, grad, std::chrono::milliseconds(ctx->saved_data["t"].toInt()));
    return {grad, at::Tensor(), at::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            int64_t group, int64_t timeoutMs) {
    auto* g = reinterpret_cast<const Group*>(group);
    at::Tensor out = x.contiguous().clone();
    allReduceSum(*g, out, std::chrono::milliseconds(timeoutMs));
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    return {grads[0], at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor copyToTensorParallel(const at::Tensor& x, const std::shared_ptr<Group>& group,
                                std::chrono::milliseconds timeout) {
  if (!group || !group->backend) return x;
  return CopyToTp::apply(x, reinterpret_cast<int64_t>(group.get()), timeout.count());
}

at::Tensor reduceFromTensorParallel(const at::Tensor& x, const std::shared_ptr<Group>& group,
                                    std::chrono::milliseconds timeout) {
  if (!group || !group->backend) return x;
  return ReduceFromTp::apply(x, reinterpret_cast<int64_t>(group.get()), timeout.count());
}

}  // namespace stagescope::engine
