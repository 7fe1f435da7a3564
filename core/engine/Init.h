// Layout-independent initial weights and data (DESIGN "Contracts: layout independence").
//
// The full (unsharded) value of every parameter depends only on (seed, full name, full
// shape); the global batch depends only on (seed, iteration, global sample index).  Any
// TP/PP/DP layout of one config therefore computes the same mathematics.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/events/Checksum.h"

namespace stagescope::engine {

enum class InitKind {
  Linear,      // N(0, 1/fan_in)  (fan_in = last dim)
  Bias,        // N(0, 0.1^2)
  NormWeight,  // 1 + N(0, 0.1^2)   (LayerNorm weight "around 1")
  NormBias,    // N(0, 0.1^2)
  Embedding,   // N(0, 1)
  Position,    // N(0, 0.1^2)
};

// FNV-1a 64 of `text` (standard offset basis unless `seed` is given): the generator seed of
// every initial weight and sample.  Changing it changes every initial weight, so the engine,
// the single-process reference and tests/bench/torch_pipeline_1f1b.py all use this function.
uint64_t fnv1a(const std::string& text, uint64_t seed = events::kFnv1a64OffsetBasis);

// The full parameter, float32 on the CPU, drawn from a generator seeded by (seed, name).
at::Tensor initialFull(uint64_t seed, const std::string& name, const std::vector<int64_t>& shape,
                       InitKind kind);

// One global sample of one iteration.  tokens: int64 [textLen + 1]; patches of encoder
// `encoder`: float32 [patches, patchDim].
at::Tensor sampleTokens(uint64_t seed, int iteration, int64_t sample, int textLen, int vocab);
at::Tensor samplePatches(uint64_t seed, int iteration, int64_t sample, const std::string& encoder,
                         int patches, int patchDim);

// A batch of consecutive global samples [first, first + count): tokens [count, textLen+1],
// patches [count, patches, patchDim].
at::Tensor batchTokens(uint64_t seed, int iteration, int64_t first, int count, int textLen,
                       int vocab);
at::Tensor batchPatches(uint64_t seed, int iteration, int64_t first, int count,
                        const std::string& encoder, int patches, int patchDim);

}  // namespace stagescope::engine
