#include "core/engine/Executor.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/optim/optimizer.h>

#include <cstdlib>
#include <stdexcept>

#include "core/engine/Clock.h"
#include "core/engine/Init.h"
#include "core/engine/Optimizer.h"
#include "core/engine/TensorDigest.h"
#include "core/engine/TensorParallel.h"

namespace stagescope::engine {

using events::ActionKind;

Executor::Executor(const plan::RunConfig& config, const plan::Topology& topology,
                   const plan::Plan& plan, int rank, ProcessGroups& groups,
                   events::Recorder& recorder, at::Device device)
    : config_(config),
      topology_(topology),
      me_(plan.ranks.at(rank)),
      rank_(rank),
      groups_(groups),
      recorder_(recorder),
      device_(device) {
  const auto& module = config.module(me_.module);
  const auto& grid = topology.grid(me_.module);
  auto tpGroup = groups.get(grid.groupOf({"tp"}, rank), me_.module + "/tp");
  dpGroup_ = groups.get(grid.groupOf({"dp"}, rank), me_.module + "/dp");
  faults_ = std::make_unique<FaultInjector>(config.faults, config, rank, me_.module, me_.pp);
  model_ = std::make_unique<StageModel>(config, module, me_.pp, me_.tp, tpGroup, groups.timeout(),
                                        device);
  comm_ = std::make_unique<Communicator>(me_, groups, recorder, device, &wait_,
                                         faults_->empty() ? nullptr : faults_.get());
  // STAGESCOPE_PREPOST=0 turns pre-posted receives off (the benchmark measures both).
  const char* prepost = std::getenv("STAGESCOPE_PREPOST");
  prepost_ = !(prepost && std::string(prepost) == "0");
  std::vector<at::Tensor> values;
  for (auto& p : model_->params()) values.push_back(p.value);
  optimizer_ = makeOptimizer(config.optimizer, values);
}

Executor::~Executor() = default;

bool Executor::recording(int iteration) const {
  return recorder_.level() > events::RecordLevel::Off &&
         config_.record.wants(iteration, me_.module, rank_);
}

StageInput Executor::dataFor(int iteration, int microbatch) const {
  // Global sample layout (issue "Engine", data): llm replica r, microbatch j holds samples
  // j*(mbs*dp_llm) + r*mbs ...; encoder replica e holds j*(mbs*dp_llm) + e*mbs_enc ...
  const auto& llm = config_.llm();
  const int64_t perMicrobatch = static_cast<int64_t>(config_.microBatchSize) * llm.dp;
  const auto& module = config_.module(me_.module);
  StageInput in;
  if (module.kind == "encoder") {
    const int mbs = config_.encoderMicroBatchSize(module);
    in.patches = batchPatches(config_.seed, iteration,
                              microbatch * perMicrobatch + static_cast<int64_t>(me_.dp) * mbs, mbs,
                              module.name, module.patches, module.patchDim);
  } else {
    const int mbs = config_.microBatchSize;
    in.tokens = batchTokens(config_.seed, iteration,
                            microbatch * perMicrobatch + static_cast<int64_t>(me_.dp) * mbs, mbs,
                            module.textLen, module.vocab);
  }
  return in;
}

void Executor::forward(int iteration, const plan::Action& a) {
  faults_->atCompute(iteration, a.microbatch, false);
  StageInput in;
  const bool needsData = model_->isFirst() || model_->computesLoss();
  if (needsData) in = dataFor(iteration, a.microbatch);
  auto& leaves = inputs_[a.microbatch];
  auto rec = received_.find(a.microbatch);
  if (rec != received_.end()) {
    for (auto& [key, t] : rec->second)
      leaves[key] = t.detach().requires_grad_(!config_.forwardOnly);
    received_.erase(rec);
  }
  if (model_->isFirst() && recording(iteration) && recorder_.level() >= events::RecordLevel::Full) {
    recordInput(iteration, a.microbatch, in);
  }
  if (!model_->isFirst()) {
    auto it = leaves.find(me_.module);
    if (it == leaves.end()) {
      throw std::runtime_error("rank " + std::to_string(rank_) + ": forward of microbatch " +
                               std::to_string(a.microbatch) + " has no received activation");
    }
    in.hidden = it->second;
  } else {
    in.encoderOutputs = leaves;
  }
  at::Tensor out;
  {
    std::optional<at::NoGradGuard> noGrad;
    if (config_.forwardOnly) noGrad.emplace();
    out = model_->forward(in);
  }
  if (model_->computesLoss()) {
    const double loss = out.item<double>();
    losses_.push_back(loss);
    if (recording(iteration)) {
      recorder_.loss({rank_, iteration, a.microbatch, me_.dp, loss});
    }
  }
  outputs_[a.microbatch] = out;
}

void Executor::recordInput(int iteration, int microbatch, const StageInput& in) {
  // Inputs at level full: with the initial parameters, enough to recompute the step from the
  // file alone.  Encoder first stages hold patches [mbs_enc, P, d]; the llm first stage
  // holds tokens [mbs, T+1] (inputs and labels).
  const bool encoder = config_.module(me_.module).kind == "encoder";
  const at::Tensor& t = encoder ? in.patches : in.tokens;
  events::InputRecord r;
  r.rank = rank_;
  r.iteration = iteration;
  r.microbatch = microbatch;
  r.module = me_.module;
  r.name = encoder ? "patches" : "tokens";
  r.shape = shapeOf(t);
  r.dtype = dtypeName(t);
  r.payload = hostBytes(t);
  recorder_.input(std::move(r));
}

void Executor::backward(int iteration, const plan::Action& a) {
  faults_->atCompute(iteration, a.microbatch, true);
  at::Tensor out = outputs_.at(a.microbatch);
  if (model_->computesLoss()) {
    // Normalise by m and apply the loss scale once, here on the global last stage only.
    at::Tensor scaled = out * (config_.lossScale / config_.microbatches);
    scaled.backward();
  } else {
    auto g = outputGrads_.find(a.microbatch);
    if (g == outputGrads_.end()) {
      throw std::runtime_error("rank " + std::to_string(rank_) + ": backward of microbatch " +
                               std::to_string(a.microbatch) + " has no output gradient");
    }
    torch::autograd::backward({out}, {g->second});
    outputGrads_.erase(g);
  }
  // Kept by reference: at micro-batch size 1 autograd may let leaf.grad() share storage
  // with a parameter's .grad (cat + broadcast add), which the next backward accumulates into.
  // It is read once, by the SB / SB_RF that follows this backward in every plan (no backward
  // runs in between), and the Communicator copies it on post (Communicator.h, "Buffer
  // ownership"), so what travels is this microbatch's gradient.
  auto& grads = inputGrads_[a.microbatch];
  for (auto& [key, leaf] : inputs_[a.microbatch]) {
    if (leaf.requires_grad() && leaf.grad().defined()) grads[key] = leaf.grad();
  }
  inputs_.erase(a.microbatch);
  outputs_.erase(a.microbatch);
  if (recording(iteration) && recorder_.level() >= events::RecordLevel::Stats) {
    recordGradients(iteration, a.microbatch, events::GradPhase::Accumulated);
  }
}

void Executor::communicate(int iteration, int seq, const plan::Action& a) {
  CommIds ids{iteration, seq, &a};
  const at::Tensor* activation = nullptr;
  at::Tensor act;
  if (a.kind == ActionKind::SendForward || a.kind == ActionKind::SendForwardRecvBackward) {
    act = outputs_.at(a.microbatch);
    activation = &act;
  }
  const std::map<std::string, at::Tensor>* grads = nullptr;
  int gradMb = a.kind == ActionKind::SendBackward ? a.microbatch : a.gradMicrobatch;
  if (a.kind == ActionKind::SendBackward || a.kind == ActionKind::SendBackwardRecvForward) {
    grads = &inputGrads_.at(gradMb);
  }
  std::map<std::string, at::Tensor> inputs;
  at::Tensor grad;
  comm_->run(ids, activation, grads, &inputs, &grad);
  if (a.kind == ActionKind::SendForward && config_.forwardOnly) outputs_.erase(a.microbatch);
  if (grads) inputGrads_.erase(gradMb);
  if (!inputs.empty()) received_[a.microbatch] = std::move(inputs);
  if (grad.defined()) {
    const int mb = a.kind == ActionKind::RecvBackward ? a.microbatch : a.gradMicrobatch;
    outputGrads_[mb] = grad;
  }
}

void Executor::reduceGradients(int iteration) {
  // One flat buffer per rank: SUM over the module's DP group, then / dp_llm / loss scale.
  std::vector<at::Tensor> grads;
  for (auto& p : model_->params()) {
    if (!p.value.grad().defined()) p.value.mutable_grad() = at::zeros_like(p.value);
    grads.push_back(p.value.grad().reshape({-1}));
  }
  at::Tensor flat = at::cat(grads);
  if (dpGroup_) allReduceSum(*dpGroup_, flat, groups_.timeout());
  flat.div_(static_cast<double>(config_.llm().dp) * config_.lossScale);
  int64_t offset = 0;
  for (auto& p : model_->params()) {
    const int64_t n = p.value.numel();
    p.value.mutable_grad().copy_(flat.narrow(0, offset, n).view_as(p.value));
    offset += n;
  }
  if (recording(iteration)) recordGradients(iteration, -1, events::GradPhase::Reduced);
}

void Executor::optimizerStep(int iteration) {
  optimizer_->step();
  optimizer_->zero_grad(true);
  if (recording(iteration) && recorder_.level() >= events::RecordLevel::Stats) {
    recordGradients(iteration, -1, events::GradPhase::ParamAfterStep);
  }
}

void Executor::recordGradients(int iteration, int microbatch, events::GradPhase phase) {
  const bool values =
      phase == events::GradPhase::ParamAfterStep || phase == events::GradPhase::ParamInitial;
  for (const auto& p : model_->params()) {
    at::Tensor t = values ? p.value.detach() : p.value.grad();
    if (!t.defined()) continue;
    // Accumulated gradients still carry the loss scale; record them unscaled.
    if (!values && phase == events::GradPhase::Accumulated && config_.lossScale != 1.0) {
      t = t / config_.lossScale;
    }
    events::GradientRecord r;
    r.rank = rank_;
    r.iteration = iteration;
    r.microbatch = microbatch;
    r.phase = phase;
    r.param = p.name;
    r.module = me_.module;
    r.tp = me_.tp;
    r.pp = me_.pp;
    r.dp = me_.dp;
    r.partitionDim = p.partitionDim;
    r.partitionOffset = p.partitionOffset;
    r.shape = shapeOf(t);
    r.fullShape = p.fullShape;
    r.dtype = dtypeName(t);
    if (recorder_.level() >= events::RecordLevel::Stats) {
      TensorDigest d = digest(t);
      r.checksum = d.checksum;
      r.stats = d.stats;
      r.hasStats = true;
      r.norm = d.stats.l2;
    }
    if (recorder_.level() >= events::RecordLevel::Full) r.payload = hostBytes(t);
    recorder_.gradient(std::move(r));
  }
}

IterationResult Executor::runIteration(int iteration) {
  const int64_t t0 = nowNs();
  losses_.clear();
  wait_.iteration = iteration;
  if (iteration == 0 && recording(iteration) && recorder_.level() >= events::RecordLevel::Full) {
    recordGradients(iteration, -1, events::GradPhase::ParamInitial);
  }
  const auto& actions = me_.actions;
  for (int seq = 0; seq < static_cast<int>(actions.size()); ++seq) {
    const plan::Action& a = actions[seq];
    wait_.actionSeq = seq;
    const int64_t start = nowNs();
    if ((a.kind == ActionKind::Forward || a.kind == ActionKind::Backward) && prepost_ &&
        seq + 1 < static_cast<int>(actions.size())) {
      // The next action's receives are posted before this compute (Communicator::prepostRecvs).
      const plan::Action& next = actions[seq + 1];
      if (!next.messages.empty()) comm_->prepostRecvs({iteration, seq + 1, &next});
    }
    switch (a.kind) {
      case ActionKind::Forward:
        forward(iteration, a);
        break;
      case ActionKind::Backward:
        backward(iteration, a);
        break;
      case ActionKind::DpReduce:
        reduceGradients(iteration);
        break;
      case ActionKind::OptimizerStep:
        optimizerStep(iteration);
        break;
      default:
        communicate(iteration, seq, a);
        break;
    }
    const int64_t end = nowNs();
    if (recording(iteration)) {
      events::ActionRecord rec = plan::toRecord(me_, static_cast<size_t>(seq), iteration);
      rec.startNs = start;
      rec.endNs = end;
      recorder_.action(std::move(rec));
    }
  }
  comm_->finishSends();
  IterationResult result;
  result.iteration = iteration;
  if (!losses_.empty()) {
    // Global-batch mean: average this replica's microbatch losses, then over the LM DP group.
    double sum = 0;
    for (double l : losses_) sum += l;
    at::Tensor t = at::full({1}, sum / losses_.size(), at::TensorOptions().dtype(at::kDouble));
    if (dpGroup_) allReduceSum(*dpGroup_, t, groups_.timeout());
    result.loss = t.item<double>() / config_.llm().dp;
    result.hasLoss = true;
    if (recording(iteration)) recorder_.loss({rank_, iteration, -1, me_.dp, result.loss});
  }
  received_.clear();
  inputs_.clear();
  outputs_.clear();
  outputGrads_.clear();
  inputGrads_.clear();
  result.seconds = static_cast<double>(nowNs() - t0) / 1e9;
  return result;
}

}  // namespace stagescope::engine
