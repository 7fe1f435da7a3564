#include "core/engine/StageModel.h"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>

#include "core/engine/Init.h"
#include "core/engine/TensorDigest.h"
#include "core/engine/TensorParallel.h"

namespace stagescope::engine {

StageModel::StageModel(const plan::RunConfig& config, const plan::ModuleConfig& module, int stage,
                       int tpRank, std::shared_ptr<Group> tpGroup,
                       std::chrono::milliseconds timeout, at::Device device)
    : config_(config),
      module_(module),
      stage_(stage),
      tp_(module.tp),
      tpRank_(tpRank),
      tpGroup_(std::move(tpGroup)),
      timeout_(timeout),
      device_(device),
      // float32 or bfloat16 for a run; float64 only for the reference's float64 trajectory.
      dtype_(scalarTypeOf(config.dtype)) {
  const int h = module.hidden;
  llmHidden_ = config.llm().hidden;
  seqLen_ = config.llm().textLen;
  for (const auto* enc : config.encoders()) seqLen_ += enc->patches;
  const bool enc = module.isEncoder();
  if (isFirst()) {
    if (enc) {
      addParam("patch_embed.weight", {h, module.patchDim}, int(InitKind::Linear), -1);
      addParam("patch_embed.bias", {h}, int(InitKind::Bias), -1);
      addParam("pos_embed", {module.patches, h}, int(InitKind::Position), -1);
    } else {
      addParam("tok_embed", {module.vocab, h}, int(InitKind::Embedding), -1);
      addParam("pos_embed", {seqLen_, h}, int(InitKind::Position), -1);
    }
  }
  const int first = module.firstLayerOfStage(stage);
  for (int l = first; l < first + module.layersOfStage(stage); ++l) addBlock(l);
  if (isLast()) {
    addParam("final_ln.weight", {h}, int(InitKind::NormWeight), -1);
    addParam("final_ln.bias", {h}, int(InitKind::NormBias), -1);
    if (enc) {
      addParam("projector.weight", {llmHidden_, h}, int(InitKind::Linear), -1);
      addParam("projector.bias", {llmHidden_}, int(InitKind::Bias), -1);
    } else {
      addParam("head.weight", {module.vocab, h}, int(InitKind::Linear), -1);
    }
  }
}

void StageModel::addParam(const std::string& suffix, std::vector<int64_t> fullShape, int kind,
                          int partitionDim) {
  Param prm;
  prm.name = module_.name + "." + suffix;
  prm.fullShape = fullShape;
  at::Tensor full = initialFull(config_.seed, prm.name, fullShape, static_cast<InitKind>(kind));
  if (partitionDim >= 0 && tp_ > 1) {
    const int64_t part = fullShape[partitionDim] / tp_;
    prm.partitionDim = partitionDim;
    prm.partitionOffset = part * tpRank_;
    full = full.narrow(partitionDim, prm.partitionOffset, part);
  }
  // Drawn in float32 (layout independence), then held in the configured dtype.
  prm.value = full.contiguous().to(device_, dtype_).set_requires_grad(true);
  index_[suffix] = params_.size();
  params_.push_back(std::move(prm));
}

void StageModel::addBlock(int layer) {
  const int h = module_.hidden, f = module_.ffn;
  const std::string L = "layers." + std::to_string(layer) + ".";
  addParam(L + "ln1.weight", {h}, int(InitKind::NormWeight), -1);
  addParam(L + "ln1.bias", {h}, int(InitKind::NormBias), -1);
  for (const char* n : {"q", "k", "v"}) {
    addParam(L + "attn." + n + ".weight", {h, h}, int(InitKind::Linear), 0);
    addParam(L + "attn." + n + ".bias", {h}, int(InitKind::Bias), 0);
  }
  addParam(L + "attn.o.weight", {h, h}, int(InitKind::Linear), 1);
  addParam(L + "attn.o.bias", {h}, int(InitKind::Bias), -1);
  addParam(L + "ln2.weight", {h}, int(InitKind::NormWeight), -1);
  addParam(L + "ln2.bias", {h}, int(InitKind::NormBias), -1);
  addParam(L + "mlp.fc1.weight", {f, h}, int(InitKind::Linear), 0);
  addParam(L + "mlp.fc1.bias", {f}, int(InitKind::Bias), 0);
  addParam(L + "mlp.fc2.weight", {h, f}, int(InitKind::Linear), 1);
  addParam(L + "mlp.fc2.bias", {h}, int(InitKind::Bias), -1);
  auto at = [&](const std::string& name) { return position(L + name); };
  blocks_.push_back({at("ln1.weight"), at("ln1.bias"), at("attn.q.weight"), at("attn.q.bias"),
                     at("attn.k.weight"), at("attn.k.bias"), at("attn.v.weight"), at("attn.v.bias"),
                     at("attn.o.weight"), at("attn.o.bias"), at("ln2.weight"), at("ln2.bias"),
                     at("mlp.fc1.weight"), at("mlp.fc1.bias"), at("mlp.fc2.weight"),
                     at("mlp.fc2.bias")});
}

size_t StageModel::position(const std::string& suffix) const {
  auto it = index_.find(suffix);
  if (it == index_.end()) throw std::logic_error("no parameter " + module_.name + "." + suffix);
  return it->second;
}

at::Tensor& StageModel::p(const std::string& suffix) {
  return params_[position(suffix)].value;
}

const at::Tensor& StageModel::causalMask(int64_t S, const at::Device& device) {
  if (!causalMask_.defined() || causalMask_.size(0) != S || causalMask_.device() != device) {
    causalMask_ = at::ones({S, S}, at::TensorOptions().dtype(at::kBool).device(device)).triu(1);
  }
  return causalMask_;
}

at::Tensor StageModel::attention(const at::Tensor& x, const Block& b) {
  const int64_t S = x.size(0), B = x.size(1);
  const int64_t heads = module_.heads / tp_;
  const int64_t dh = module_.hidden / module_.heads;
  at::Tensor xin = copyToTensorParallel(x, tpGroup_, timeout_);
  auto proj = [&](size_t weight, size_t bias) {
    // [S,B,heads*dh] -> [B, heads, S, dh]
    return at::linear(xin, p(weight), p(bias)).view({S, B, heads, dh}).permute({1, 2, 0, 3});
  };
  at::Tensor q = proj(b.qw, b.qb), k = proj(b.kw, b.kb), v = proj(b.vw, b.vb);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(dh));
  if (module_.isLlm()) {
    scores = scores.masked_fill(causalMask(S, x.device()), -std::numeric_limits<float>::infinity());
  }
  at::Tensor ctx = at::matmul(at::softmax(scores, -1), v);      // [B, heads, S, dh]
  ctx = ctx.permute({2, 0, 1, 3}).reshape({S, B, heads * dh});  // [S, B, h/tp]
  at::Tensor partial = at::linear(ctx, p(b.ow));                // [S, B, h], partial sum
  return reduceFromTensorParallel(partial, tpGroup_, timeout_) + p(b.ob);
}

at::Tensor StageModel::mlp(const at::Tensor& x, const Block& b) {
  at::Tensor xin = copyToTensorParallel(x, tpGroup_, timeout_);
  at::Tensor hidden = at::gelu(at::linear(xin, p(b.fc1w), p(b.fc1b)));
  at::Tensor partial = at::linear(hidden, p(b.fc2w));
  return reduceFromTensorParallel(partial, tpGroup_, timeout_) + p(b.fc2b);
}

at::Tensor StageModel::block(const at::Tensor& x, const Block& b) {
  const int64_t h = module_.hidden;
  at::Tensor a = at::layer_norm(x, {h}, p(b.ln1w), p(b.ln1b), 1e-5);
  at::Tensor y = x + attention(a, b);
  at::Tensor m = at::layer_norm(y, {h}, p(b.ln2w), p(b.ln2b), 1e-5);
  return y + mlp(m, b);
}

at::Tensor StageModel::embed(const StageInput& in) {
  if (module_.isEncoder()) {
    at::Tensor patches = in.patches.to(device_, dtype_).transpose(0, 1);  // [P, B, d]
    at::Tensor x = at::linear(patches, p("patch_embed.weight"), p("patch_embed.bias"));
    return x + p("pos_embed").unsqueeze(1);
  }
  const int T = module_.textLen;
  at::Tensor tokens = in.tokens.to(device_).narrow(1, 0, T).transpose(0, 1);  // [T, B]
  std::vector<at::Tensor> parts;
  for (const auto* enc : config_.encoders()) {
    auto it = in.encoderOutputs.find(enc->name);
    if (it == in.encoderOutputs.end()) {
      throw std::runtime_error("llm first stage: no activation from encoder '" + enc->name + "'");
    }
    parts.push_back(it->second);
  }
  parts.push_back(at::embedding(p("tok_embed"), tokens));  // [T, B, h]
  return at::cat(parts, 0) + p("pos_embed").unsqueeze(1);
}

at::Tensor StageModel::head(const at::Tensor& x, const at::Tensor& tokens) {
  const int64_t h = module_.hidden;
  const int T = module_.textLen;
  at::Tensor y = at::layer_norm(x, {h}, p("final_ln.weight"), p("final_ln.bias"), 1e-5);
  if (module_.isEncoder()) return at::linear(y, p("projector.weight"), p("projector.bias"));
  at::Tensor text = y.narrow(0, y.size(0) - T, T);                         // [T, B, h]
  at::Tensor logits = at::linear(text, p("head.weight"));                  // [T, B, V]
  at::Tensor labels = tokens.to(device_).narrow(1, 1, T).transpose(0, 1);  // [T, B]
  // The loss in float32 (float64 for the reference's float64 trajectory).
  const auto lossType = dtype_ == at::kDouble ? at::kDouble : at::kFloat;
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(lossType),
                                labels.reshape({-1}));
}

at::Tensor StageModel::forward(const StageInput& in) {
  at::Tensor x = isFirst() ? embed(in) : in.hidden;
  for (const Block& b : blocks_) x = block(x, b);
  return isLast() ? head(x, in.tokens) : x;
}

}  // namespace stagescope::engine
