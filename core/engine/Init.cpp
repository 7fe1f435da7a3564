#include "core/engine/Init.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

namespace stagescope::engine {

uint64_t fnv1a(const std::string& text, uint64_t seed) {
  return events::fnv1a64(text, seed);
}

namespace {

at::Generator generatorFor(const std::string& key) {
  return at::make_generator<at::CPUGeneratorImpl>(fnv1a(key));
}

std::string sampleKey(uint64_t seed, int iteration, int64_t sample, const std::string& what) {
  return std::to_string(seed) + "/data/" + std::to_string(iteration) + "/" +
         std::to_string(sample) + "/" + what;
}

}  // namespace

at::Tensor initialFull(uint64_t seed, const std::string& name, const std::vector<int64_t>& shape,
                       InitKind kind) {
  at::Generator gen = generatorFor(std::to_string(seed) + "/param/" + name);
  at::Tensor z = at::normal(0.0, 1.0, shape, gen, at::TensorOptions().dtype(at::kFloat));
  switch (kind) {
    case InitKind::Linear:
      return z / std::sqrt(static_cast<double>(shape.back()));
    case InitKind::Bias:
    case InitKind::NormBias:
    case InitKind::Position:
      return z * 0.1;
    case InitKind::NormWeight:
      return z * 0.1 + 1.0;
    case InitKind::Embedding:
      return z;
  }
  return z;
}

at::Tensor sampleTokens(uint64_t seed, int iteration, int64_t sample, int textLen, int vocab) {
  at::Generator gen = generatorFor(sampleKey(seed, iteration, sample, "tokens"));
  return at::randint(vocab, {textLen + 1}, gen, at::TensorOptions().dtype(at::kLong));
}

at::Tensor samplePatches(uint64_t seed, int iteration, int64_t sample, const std::string& encoder,
                         int patches, int patchDim) {
  at::Generator gen = generatorFor(sampleKey(seed, iteration, sample, "patches/" + encoder));
  return at::normal(0.0, 1.0, {patches, patchDim}, gen, at::TensorOptions().dtype(at::kFloat));
}

at::Tensor batchTokens(uint64_t seed, int iteration, int64_t first, int count, int textLen,
                       int vocab) {
  std::vector<at::Tensor> rows;
  for (int i = 0; i < count; ++i)
    rows.push_back(sampleTokens(seed, iteration, first + i, textLen, vocab));
  return at::stack(rows);
}

at::Tensor batchPatches(uint64_t seed, int iteration, int64_t first, int count,
                        const std::string& encoder, int patches, int patchDim) {
  std::vector<at::Tensor> rows;
  for (int i = 0; i < count; ++i) {
    rows.push_back(samplePatches(seed, iteration, first + i, encoder, patches, patchDim));
  }
  return at::stack(rows);
}

}  // namespace stagescope::engine
