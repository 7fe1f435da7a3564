// One pipeline stage of one module of the multimodal transformer (issue "Engine", model
// section), tensor-parallel over `tpGroup`.  Activations between stages are [seq, batch,
// hidden].  Every parameter knows its full logical name and how its shard sits in the full
// tensor, so gradients from any layout can be gathered and compared.
//
// Shards: attention q/k/v weight [h/tp, h] and bias [h/tp] (dim 0, by heads), attention out
// weight [h, h/tp] (dim 1); mlp fc1 weight [ffn/tp, h] and bias (dim 0), fc2 weight [h, ffn/tp]
// (dim 1).  Everything else (LayerNorms, row-parallel biases, embeddings, projector, LM head)
// is replicated over TP; its gradient is complete on every TP rank because the block
// inputs go through copyToTensorParallel.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/ProcessGroups.h"
#include "core/plan/Config.h"

namespace stagescope::engine {

struct Param {
  std::string name;  // "llm.layers.3.attn.q.weight"
  at::Tensor value;  // the local shard; a leaf that requires grad
  std::vector<int64_t> fullShape;
  int partitionDim = -1;  // -1: replicated
  int64_t partitionOffset = 0;
};

// What a stage consumes.  First encoder stage: `patches` [B, P, d].  First llm stage:
// `encoderOutputs` (by encoder name, [P_e, B, h]) and `tokens` [B, T+1].  Later stages:
// `hidden` [S, B, h].  The last llm stage also needs `tokens` for the labels.
struct StageInput {
  at::Tensor hidden;
  std::map<std::string, at::Tensor> encoderOutputs;
  at::Tensor tokens;
  at::Tensor patches;
};

class StageModel {
 public:
  StageModel(const plan::RunConfig& config, const plan::ModuleConfig& module, int stage, int tpRank,
             std::shared_ptr<Group> tpGroup, std::chrono::milliseconds timeout, at::Device device);

  bool isFirst() const { return stage_ == 0; }
  bool isLast() const { return stage_ == module_.pp - 1; }
  bool computesLoss() const { return isLast() && module_.isLlm(); }
  const plan::ModuleConfig& module() const { return module_; }
  std::vector<Param>& params() { return params_; }
  const std::vector<Param>& params() const { return params_; }

  // Returns the stage output [S, B, h_out], or at the last llm stage the microbatch loss:
  // cross-entropy averaged over the microbatch's text tokens (a scalar).
  at::Tensor forward(const StageInput& in);

 private:
  // Positions in params_ of one transformer block's parameters, resolved once at construction
  // so that a forward does no name building or lookup per parameter.
  struct Block {
    size_t ln1w, ln1b, qw, qb, kw, kb, vw, vb, ow, ob, ln2w, ln2b, fc1w, fc1b, fc2w, fc2b;
  };
  at::Tensor& p(const std::string& suffix);
  at::Tensor& p(size_t position) { return params_[position].value; }
  size_t position(const std::string& suffix) const;
  void addParam(const std::string& suffix, std::vector<int64_t> fullShape, int kind,
                int partitionDim);
  void addBlock(int layer);
  at::Tensor block(const at::Tensor& x, const Block& b);
  at::Tensor attention(const at::Tensor& x, const Block& b);
  at::Tensor mlp(const at::Tensor& x, const Block& b);
  // The llm's causal mask [S, S] (true above the diagonal), built once per S and only read.
  const at::Tensor& causalMask(int64_t S, const at::Device& device);
  at::Tensor embed(const StageInput& in);
  at::Tensor head(const at::Tensor& x, const at::Tensor& tokens);

  const plan::RunConfig& config_;
  const plan::ModuleConfig& module_;
  int stage_;
  int tp_;
  int tpRank_;
  std::shared_ptr<Group> tpGroup_;
  std::chrono::milliseconds timeout_;
  at::Device device_;
  at::ScalarType dtype_;  // parameters and activations (config dtype); the loss is float32
  int llmHidden_ = 0;
  int seqLen_ = 0;  // llm: sum of encoder patches + textLen
  std::vector<Param> params_;
  std::map<std::string, size_t> index_;  // suffix -> params_ position
  std::vector<Block> blocks_;            // this stage's blocks, first layer first
  at::Tensor causalMask_;
};

}  // namespace stagescope::engine
