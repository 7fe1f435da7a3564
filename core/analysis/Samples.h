// Which global samples each record is of (docs/model.md, "Data"), and the samples themselves.
//
// A stagescope run's data depends only on (seed, iteration, global sample index): the engine
// draws sample s of iteration i from a generator seeded by FNV-1a of "seed/data/i/s/what"
// (core/engine/Init.cpp).  Iteration i trains on its global batch, samples 0 .. B-1 with
// B = microbatches x micro_batch_size x llm dp.  Microbatch j of replica r of a module with
// per-replica microbatch size b_M (the llm's micro_batch_size, or an encoder's
// micro_batch_size x llm dp / encoder dp) holds samples j x (B / microbatches) + r x b_M,
// b_M of them.
//
// This is the one place analysis derives sample identity from a run: check's `inputs` rule,
// compare's alignment of inputs by sample, and compare's "same global batch" all call it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

// What one module's records hold per replica and microbatch.
struct ModuleSamples {
  events::ModuleKind kind = events::ModuleKind::Encoder;
  bool isLlm() const { return kind == events::ModuleKind::Llm; }
  int dp = 1;
  int perReplica = 1;  // samples per replica and microbatch (b_M above)
  // The shape of one sample: tokens [textLen + 1] (llm) or patches [patches, patchDim].
  int patches = 0, patchDim = 0, textLen = 0, vocab = 0;
  bool sameData(const ModuleSamples& o) const {
    return kind == o.kind && patches == o.patches && patchDim == o.patchDim &&
           textLen == o.textLen && vocab == o.vocab;
  }
};

struct SampleLayout {
  bool known = false;  // false: the run has no stagescope config (a captured job) or it did
  std::string why;     // not parse; `why` says which
  uint64_t seed = 0;
  int microbatches = 0;
  int64_t globalBatch = 0;  // B: samples per iteration
  std::map<std::string, ModuleSamples> modules;
  // The first global sample of (module, dp replica, microbatch); -1 when the module is unknown.
  int64_t firstSample(const std::string& module, int dp, int microbatch) const;
  // Samples per replica and microbatch of `module`; 0 when unknown.
  int perReplica(const std::string& module) const;
};

// Read from the run's config (run.info.configText).
SampleLayout sampleLayoutOf(const model::RunModel& run);

// Whether two runs train every iteration on the same samples: the same seed draws the same
// sample for the same (iteration, index), so the same seed, the same B and the same sample
// shape per module (whatever microbatches x micro_batch_size x dp split B) is the same global
// batch.  `note` says what differs when not.  Both layouts must be known.
struct GlobalBatchIdentity {
  bool same = true;
  std::string note;
};
GlobalBatchIdentity globalBatchIdentity(const SampleLayout& a, const SampleLayout& b);

// The engine's samples, regenerated without LibTorch: a port of engine::sampleTokens and
// engine::samplePatches (MT19937 seeded as at::CPUGeneratorImpl, the CPU kernels of
// at::randint and at::normal).  Tokens are exact.  Patches follow the scalar Box-Muller of
// at::normal's CPU kernel; LibTorch's vectorized build (AVX2) computes log, sin and cos with
// other approximations, so they agree to a few float32 ulps, not bitwise
// (kPatchElementTolerance).  A sample of fewer than 16 values takes another generator path in
// LibTorch (a cached double-precision normal) that is not ported: nullopt.
std::vector<int64_t> regenerateTokens(uint64_t seed, int iteration, int64_t sample, int textLen,
                                      int vocab);
std::optional<std::vector<float>> regeneratePatches(uint64_t seed, int iteration, int64_t sample,
                                                    const std::string& encoder, int patches,
                                                    int patchDim);
// |recorded - regenerated| allowed per patch element, relative to max(1, |regenerated|).
// Measured (tests/engine/SampleDataTest.cpp, 169,200 values of 3 seeds, 5 shapes): 62 % bitwise,
// the worst 2.0e-6 from LibTorch's own draws (5x inside); another sample's values are O(1) away.
inline constexpr double kPatchElementTolerance = 1e-5;

}  // namespace stagescope::analysis
