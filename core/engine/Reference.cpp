#include "core/engine/Reference.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <memory>

#include "core/engine/Init.h"
#include "core/engine/Optimizer.h"
#include "core/engine/StageModel.h"

namespace stagescope::engine {
namespace {

// Whole modules in one process: copies of the module configs with tp = pp = dp = 1.
struct FullModel {
  std::vector<plan::ModuleConfig> modules;  // config order
  std::vector<std::unique_ptr<StageModel>> stages;
  StageModel* llm = nullptr;
  std::map<std::string, StageModel*> encoders;

  explicit FullModel(const plan::RunConfig& config) {
    for (const auto& m : config.modules) {
      plan::ModuleConfig full = m;
      full.tp = full.pp = full.dp = 1;
      full.stageLayers.clear();
      modules.push_back(full);
    }
    for (const auto& m : modules) {
      stages.push_back(std::make_unique<StageModel>(config, m, 0, 0, nullptr,
                                                    std::chrono::milliseconds(0), at::kCPU));
      if (m.isLlm()) {
        llm = stages.back().get();
      } else {
        encoders[m.name] = stages.back().get();
      }
    }
  }
  std::vector<at::Tensor> values() {
    std::vector<at::Tensor> v;
    for (auto& s : stages) {
      for (auto& p : s->params()) v.push_back(p.value);
    }
    return v;
  }
};

}  // namespace

std::map<std::string, at::Tensor> referenceInitialParams(const plan::RunConfig& config) {
  FullModel model(config);
  std::map<std::string, at::Tensor> out;
  for (auto& s : model.stages) {
    for (auto& p : s->params()) out[p.name] = p.value.detach().clone();
  }
  return out;
}

GlobalBatch generatedBatch(const plan::RunConfig& config, int iteration) {
  const auto& llm = config.llm();
  const int count = config.globalBatch();
  GlobalBatch b;
  b.tokens = batchTokens(config.seed, iteration, 0, count, llm.textLen, llm.vocab);
  for (const auto* enc : config.encoders()) {
    b.patches[enc->name] =
        batchPatches(config.seed, iteration, 0, count, enc->name, enc->patches, enc->patchDim);
  }
  return b;
}

namespace {

// One iteration: microbatch j of llm replica r holds samples j*mbs*dp + r*mbs .. +mbs; the
// loss is the mean of those microbatch losses (= the mean over the global batch).
ReferenceIteration step(const plan::RunConfig& config, FullModel& model,
                        torch::optim::Optimizer* optimizer, const GlobalBatch& batch) {
  const auto& llm = config.llm();
  const int mbs = config.microBatchSize;
  const int m = config.microbatches;
  ReferenceIteration r;
  at::Tensor total = at::zeros({}, at::kDouble);
  for (int j = 0; j < m; ++j) {
    for (int rep = 0; rep < llm.dp; ++rep) {
      const int64_t first =
          static_cast<int64_t>(j) * mbs * llm.dp + static_cast<int64_t>(rep) * mbs;
      StageInput in;
      in.tokens = batch.tokens.narrow(0, first, mbs);
      for (const auto* enc : config.encoders()) {
        StageInput ein;
        ein.patches = batch.patches.at(enc->name).narrow(0, first, mbs);
        in.encoderOutputs[enc->name] = model.encoders.at(enc->name)->forward(ein);
      }
      at::Tensor loss = model.llm->forward(in);
      r.microbatchLosses.push_back(loss.item<double>());
      total = total + loss.to(at::kDouble) / (static_cast<double>(m) * llm.dp);
    }
  }
  r.loss = total.item<double>();
  if (config.forwardOnly) return r;
  total.backward();
  for (auto& s : model.stages) {
    for (auto& p : s->params()) {
      r.gradients[p.name] =
          p.value.grad().defined() ? p.value.grad().clone() : at::zeros_like(p.value);
    }
  }
  optimizer->step();
  optimizer->zero_grad(true);
  for (auto& s : model.stages) {
    for (auto& p : s->params()) r.paramsAfterStep[p.name] = p.value.detach().clone();
  }
  return r;
}

// Copies full parameters (by name) into the model's; names the model lacks are ignored.
void loadParams(FullModel& model, const std::map<std::string, at::Tensor>& params) {
  at::NoGradGuard noGrad;
  for (auto& s : model.stages) {
    for (auto& p : s->params()) {
      auto it = params.find(p.name);
      if (it != params.end()) p.value.copy_(it->second.reshape(p.value.sizes()));
    }
  }
}

}  // namespace

ReferenceIteration referenceStep(const plan::RunConfig& config,
                                 const std::map<std::string, at::Tensor>& params,
                                 const GlobalBatch& batch) {
  FullModel model(config);
  loadParams(model, params);
  auto optimizer = makeOptimizer(config.optimizer, model.values());
  return step(config, model, optimizer.get(), batch);
}

std::vector<ReferenceIteration> runReference(const plan::RunConfig& config, int iterations,
                                             const std::map<int, FullParams>& restartFrom) {
  FullModel model(config);
  auto optimizer = makeOptimizer(config.optimizer, model.values());
  std::vector<ReferenceIteration> out;
  for (int it = 0; it < iterations; ++it) {
    if (auto r = restartFrom.find(it - 1); r != restartFrom.end() && !r->second.empty()) {
      loadParams(model, r->second);
    }
    out.push_back(step(config, model, optimizer.get(), generatedBatch(config, it)));
  }
  return out;
}

}  // namespace stagescope::engine
