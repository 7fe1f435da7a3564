#include "core/engine/Executor.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include "core/engine/Clock.h"
#include "core/engine/Init.h"
#include "core/engine/Optimizer.h"
#include "core/engine/TensorDigest.h"
#include "core/engine/TensorParallel.h"

namespace stagescope::engine {

using events::ActionKind;

// One stage this rank holds, with everything that executes it.
struct Executor::Unit {
  const plan::ModuleConfig* module = nullptr;
  plan::RankStage role;
  std::unique_ptr<FaultInjector> faults;
  std::unique_ptr<StageModel> model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::shared_ptr<Group> dpGroup;

  // Per-microbatch state of the current iteration.
  std::map<int, std::map<std::string, at::Tensor>> received;    // inputs from RF
  std::map<int, std::map<std::string, at::Tensor>> inputs;      // leaves used by F
  std::map<int, at::Tensor> outputs;                            // F outputs (loss at the end)
  std::map<int, at::Tensor> outputGrads;                        // from RB
  std::map<int, std::map<std::string, at::Tensor>> inputGrads;  // from B, for SB

  void clear() {
    received.clear();
    inputs.clear();
    outputs.clear();
    outputGrads.clear();
    inputGrads.clear();
  }
};

Executor::Executor(const plan::RunConfig& config, const plan::Topology& topology,
                   const plan::Plan& plan, int rank, ProcessGroups& groups,
                   events::Recorder& recorder, at::Device device, bool prepostReceives)
    : config_(config),
      topology_(topology),
      me_(plan.ranks.at(rank)),
      rank_(rank),
      groups_(groups),
      recorder_(recorder),
      device_(device) {
  comm_ = std::make_unique<Communicator>(me_, groups, recorder, device, &wait_, nullptr);
  prepost_ = prepostReceives;
  // The last action of each (module, microbatch) that sends input gradients: after it, that
  // microbatch's input gradients of the module are dropped.
  std::set<std::pair<std::string, int>> seen;
  for (int seq = static_cast<int>(me_.actions.size()) - 1; seq >= 0; --seq) {
    const plan::Action& a = me_.actions[seq];
    if (a.kind == ActionKind::SendBackward && seen.insert({a.module, a.microbatch}).second) {
      lastGradientSend_.insert(seq);
    }
    if (a.kind == ActionKind::SendBackwardRecvForward &&
        seen.insert({a.module, a.gradMicrobatch}).second) {
      lastGradientSend_.insert(seq);
    }
  }
  for (const plan::RankStage& role : me_.stages) {
    auto u = std::make_unique<Unit>();
    u->module = &config.module(role.module);
    u->role = role;
    const auto& grid = topology.grid(role.module);
    auto tpGroup = groups.get(grid.groupOf({"tp"}, rank), role.module + "/tp");
    u->dpGroup = groups.get(grid.groupOf({"dp"}, rank), role.module + "/dp");
    u->faults = std::make_unique<FaultInjector>(config.faults, config, rank, role.module, role.pp);
    u->model = std::make_unique<StageModel>(config, *u->module, role.pp, role.tp, tpGroup,
                                            groups.timeout(), device);
    std::vector<at::Tensor> values;
    for (auto& p : u->model->params()) values.push_back(p.value);
    u->optimizer = makeOptimizer(config.optimizer, values);
    if (u->model->computesLoss()) lossDpGroup_ = u->dpGroup;
    comm_->useFaults(role.module, u->faults->empty() ? nullptr : u->faults.get());
    units_.push_back(std::move(u));
  }
}

Executor::~Executor() = default;

Executor::Unit& Executor::unit(const std::string& module) {
  for (auto& u : units_) {
    if (u->role.module == module) return *u;
  }
  throw std::runtime_error("rank " + std::to_string(rank_) + " holds no stage of module '" +
                           module + "' (it holds " + me_.modules() + ")");
}

StageModel& Executor::model(const std::string& module) {
  return module.empty() ? *units_.front()->model : *unit(module).model;
}

bool Executor::recording(int iteration) const {
  // The [record] filter keeps a colocated rank whole when it keeps any module the rank holds
  // (docs/run-file.md, "Record filters"), as events::FilteringRecorder does: whichever of its
  // modules a record belongs to.
  if (recorder_.level() == events::RecordLevel::Off) return false;
  return std::any_of(units_.begin(), units_.end(), [&](const auto& u) {
    return config_.record.wants(iteration, u->role.module, rank_);
  });
}

StageInput Executor::dataFor(const Unit& u, int iteration, int microbatch) const {
  // Global sample layout (issue "Engine", data): llm replica r, microbatch j holds samples
  // j*(mbs*dp_llm) + r*mbs ...; encoder replica e holds j*(mbs*dp_llm) + e*mbs_enc ...
  const auto& llm = config_.llm();
  const int64_t perMicrobatch = static_cast<int64_t>(config_.microBatchSize) * llm.dp;
  const auto& module = *u.module;
  StageInput in;
  if (module.isEncoder()) {
    const int mbs = config_.encoderMicroBatchSize(module);
    in.patches = batchPatches(config_.seed, iteration,
                              microbatch * perMicrobatch + static_cast<int64_t>(u.role.dp) * mbs,
                              mbs, module.name, module.patches, module.patchDim);
  } else {
    const int mbs = config_.microBatchSize;
    in.tokens = batchTokens(config_.seed, iteration,
                            microbatch * perMicrobatch + static_cast<int64_t>(u.role.dp) * mbs, mbs,
                            module.textLen, module.vocab);
  }
  return in;
}

void Executor::forward(int iteration, const plan::Action& a) {
  Unit& u = unit(a.module);
  StageModel& model = *u.model;
  u.faults->atCompute(iteration, a.microbatch, false);
  StageInput in;
  const bool needsData = model.isFirst() || model.computesLoss();
  if (needsData) in = dataFor(u, iteration, a.microbatch);
  auto& leaves = u.inputs[a.microbatch];
  auto rec = u.received.find(a.microbatch);
  if (rec != u.received.end()) {
    for (auto& [key, t] : rec->second)
      leaves[key] = t.detach().requires_grad_(!config_.forwardOnly);
    u.received.erase(rec);
  }
  if (model.isFirst() && recording(iteration) && recorder_.level() >= events::RecordLevel::Full) {
    recordInput(u, iteration, a.microbatch, in);
  }
  if (!model.isFirst()) {
    auto it = leaves.find(a.module);
    if (it == leaves.end()) {
      throw std::runtime_error("rank " + std::to_string(rank_) + ": forward of microbatch " +
                               std::to_string(a.microbatch) + " of " + a.module +
                               " has no received activation");
    }
    in.hidden = it->second;
  } else {
    in.encoderOutputs = leaves;
  }
  at::Tensor out;
  {
    std::optional<at::NoGradGuard> noGrad;
    if (config_.forwardOnly) noGrad.emplace();
    out = model.forward(in);
  }
  if (model.computesLoss()) {
    const double loss = out.item<double>();
    losses_.push_back(loss);
    if (recording(iteration)) {
      recorder_.loss({rank_, iteration, a.microbatch, u.role.dp, loss});
    }
  }
  u.outputs[a.microbatch] = out;
}

void Executor::recordInput(const Unit& u, int iteration, int microbatch, const StageInput& in) {
  // Inputs at level full: with the initial parameters, enough to recompute the step from the
  // file alone.  Encoder first stages hold patches [mbs_enc, P, d]; the llm first stage
  // holds tokens [mbs, T+1] (inputs and labels).
  const bool encoder = u.module->isEncoder();
  const at::Tensor& t = encoder ? in.patches : in.tokens;
  events::InputRecord r;
  r.rank = rank_;
  r.iteration = iteration;
  r.microbatch = microbatch;
  r.module = u.role.module;
  r.name = encoder ? "patches" : "tokens";
  r.shape = shapeOf(t);
  r.dtype = dtypeName(t);
  r.payload = hostBytes(t);
  recorder_.input(std::move(r));
}

void Executor::backward(int iteration, const plan::Action& a) {
  Unit& u = unit(a.module);
  u.faults->atCompute(iteration, a.microbatch, true);
  at::Tensor out = u.outputs.at(a.microbatch);
  if (u.model->computesLoss()) {
    // Normalise by m and apply the loss scale once, here on the global last stage only.
    at::Tensor scaled = out * (config_.lossScale / config_.microbatches);
    scaled.backward();
  } else {
    auto g = u.outputGrads.find(a.microbatch);
    if (g == u.outputGrads.end()) {
      throw std::runtime_error("rank " + std::to_string(rank_) + ": backward of microbatch " +
                               std::to_string(a.microbatch) + " of " + a.module +
                               " has no output gradient");
    }
    torch::autograd::backward({out}, {g->second});
    u.outputGrads.erase(g);
  }
  // Kept by reference: at micro-batch size 1 autograd may let leaf.grad() share storage
  // with a parameter's .grad (cat + broadcast add), which the next backward accumulates into.
  // It is read once, by the SB / SB_RF that follows this backward in every plan (no backward
  // of this stage runs in between), and the Communicator copies it on post (Communicator.h,
  // "Buffer ownership"), so what travels is this microbatch's gradient.
  auto& grads = u.inputGrads[a.microbatch];
  for (auto& [key, leaf] : u.inputs[a.microbatch]) {
    if (leaf.requires_grad() && leaf.grad().defined()) grads[key] = leaf.grad();
  }
  u.inputs.erase(a.microbatch);
  u.outputs.erase(a.microbatch);
  if (recording(iteration) && recorder_.level() >= events::RecordLevel::Stats) {
    recordGradients(u, iteration, a.microbatch, events::GradPhase::Accumulated);
  }
}

void Executor::communicate(int iteration, int seq, const plan::Action& a) {
  Unit& u = unit(a.module);
  CommIds ids{iteration, seq, &a};
  const at::Tensor* activation = nullptr;
  at::Tensor act;
  if (a.kind == ActionKind::SendForward || a.kind == ActionKind::SendForwardRecvBackward) {
    act = u.outputs.at(a.microbatch);
    activation = &act;
  }
  const std::map<std::string, at::Tensor>* grads = nullptr;
  int gradMb = a.kind == ActionKind::SendBackward ? a.microbatch : a.gradMicrobatch;
  const bool sendsGradient =
      a.kind == ActionKind::SendBackward || a.kind == ActionKind::SendBackwardRecvForward;
  if (sendsGradient) grads = &u.inputGrads.at(gradMb);
  std::map<std::string, at::Tensor> inputs;
  at::Tensor grad;
  comm_->run(ids, activation, grads, &inputs, &grad);
  if (a.kind == ActionKind::SendForward && config_.forwardOnly && !a.internal) {
    u.outputs.erase(a.microbatch);
  }
  if (sendsGradient && lastGradientSend_.count(seq)) u.inputGrads.erase(gradMb);
  for (auto& [key, value] : inputs) u.received[a.microbatch][key] = value;
  if (grad.defined()) {
    const int mb = a.kind == ActionKind::RecvBackward ? a.microbatch : a.gradMicrobatch;
    u.outputGrads[mb] = grad;
  }
}

void Executor::reduceGradients(int iteration, Unit& u) {
  // One flat buffer per stage: SUM over the module's DP group, then / dp_llm / loss scale.
  std::vector<at::Tensor> grads;
  for (auto& p : u.model->params()) {
    if (!p.value.grad().defined()) p.value.mutable_grad() = at::zeros_like(p.value);
    grads.push_back(p.value.grad().reshape({-1}));
  }
  at::Tensor flat = at::cat(grads);
  if (u.dpGroup) allReduceSum(*u.dpGroup, flat, groups_.timeout());
  flat.div_(static_cast<double>(config_.llm().dp) * config_.lossScale);
  int64_t offset = 0;
  for (auto& p : u.model->params()) {
    const int64_t n = p.value.numel();
    p.value.mutable_grad().copy_(flat.narrow(0, offset, n).view_as(p.value));
    offset += n;
  }
  if (recording(iteration)) {
    recordGradients(u, iteration, -1, events::GradPhase::Reduced);
  }
}

void Executor::optimizerStep(int iteration, Unit& u) {
  u.optimizer->step();
  u.optimizer->zero_grad(true);
  if (recording(iteration) && recorder_.level() >= events::RecordLevel::Stats) {
    recordGradients(u, iteration, -1, events::GradPhase::ParamAfterStep);
  }
}

void Executor::recordGradients(const Unit& u, int iteration, int microbatch,
                               events::GradPhase phase) {
  const bool values =
      phase == events::GradPhase::ParamAfterStep || phase == events::GradPhase::ParamInitial;
  for (const auto& p : u.model->params()) {
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
    r.module = u.role.module;
    r.tp = u.role.tp;
    r.pp = u.role.pp;
    r.dp = u.role.dp;
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
  if (iteration == 0 && recorder_.level() >= events::RecordLevel::Full) {
    for (auto& u : units_) {
      if (recording(iteration)) {
        recordGradients(*u, iteration, -1, events::GradPhase::ParamInitial);
      }
    }
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
        reduceGradients(iteration, unit(a.module));
        break;
      case ActionKind::OptimizerStep:
        optimizerStep(iteration, unit(a.module));
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
    if (lossDpGroup_) allReduceSum(*lossDpGroup_, t, groups_.timeout());
    result.loss = t.item<double>() / config_.llm().dp;
    result.hasLoss = true;
    if (recording(iteration)) {
      recorder_.loss({rank_, iteration, -1, unit(config_.llm().name).role.dp, result.loss});
    }
  }
  for (auto& u : units_) u->clear();
  result.seconds = static_cast<double>(nowNs() - t0) / 1e9;
  return result;
}

}  // namespace stagescope::engine
