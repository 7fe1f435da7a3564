#include "core/analysis/Samples.h"

#include <cmath>
#include <exception>
#include <random>

#include "core/analysis/RunSetup.h"
#include "core/events/Checksum.h"

namespace stagescope::analysis {

int64_t SampleLayout::firstSample(const std::string& module, int dp, int microbatch) const {
  auto it = modules.find(module);
  if (!known || it == modules.end() || microbatches <= 0) return -1;
  return static_cast<int64_t>(microbatch) * (globalBatch / microbatches) +
         static_cast<int64_t>(dp) * it->second.perReplica;
}

int SampleLayout::perReplica(const std::string& module) const {
  auto it = modules.find(module);
  return it == modules.end() ? 0 : it->second.perReplica;
}

SampleLayout sampleLayoutOf(const model::RunModel& run) {
  SampleLayout s;
  const RunSetup setup = runSetupOf(run);
  const events::ModuleSettings* llm = setup.llm();
  if (!setup.known || !llm) {
    s.why = setup.known ? "its settings name no llm module" : setup.why;
    return s;
  }
  const events::RunSettings& cfg = setup.settings;
  s.seed = cfg.seed;
  s.microbatches = run.info.microbatches;
  s.globalBatch = int64_t{run.info.microbatches} * cfg.microBatchSize * llm->dp;
  for (const auto& m : cfg.modules) {
    ModuleSamples ms;
    ms.kind = m.kind;
    ms.dp = m.dp;
    // An encoder replica's micro-batch: micro_batch_size * llm dp / dp (plan::RunConfig).
    ms.perReplica = m.kind == events::ModuleKind::Llm
                        ? cfg.microBatchSize
                        : static_cast<int>(int64_t{cfg.microBatchSize} * llm->dp / m.dp);
    ms.textLen = m.textLen;
    ms.vocab = m.vocab;
    ms.patches = m.patches;
    ms.patchDim = m.patchDim;
    s.modules[m.name] = ms;
  }
  s.known = true;
  return s;
}

GlobalBatchIdentity globalBatchIdentity(const SampleLayout& a, const SampleLayout& b) {
  GlobalBatchIdentity g;
  auto differ = [&](const std::string& what) {
    g.same = false;
    g.note += (g.note.empty() ? "" : "; ") + what;
  };
  if (a.seed != b.seed)
    differ("seed " + std::to_string(a.seed) + " vs " + std::to_string(b.seed) + " (other samples)");
  if (a.globalBatch != b.globalBatch)
    differ("global batch (microbatches x micro_batch_size x llm dp) " +
           std::to_string(a.globalBatch) + " vs " + std::to_string(b.globalBatch) + " samples");
  for (const auto& [name, x] : a.modules) {
    auto it = b.modules.find(name);
    if (it != b.modules.end() && !x.sameData(it->second))
      differ(name + ": another sample shape or vocabulary");
  }
  return g;
}

namespace {

// The generator of one sample, as engine::sampleKey + generatorFor: at::CPUGeneratorImpl
// seeded with FNV-1a 64 of the key runs MT19937 from the key's low 32 bits
// (at::mt19937::init_with_uint32), which std::mt19937 reproduces.
std::mt19937 generatorFor(uint64_t seed, int iteration, int64_t sample, const std::string& what) {
  const std::string key = std::to_string(seed) + "/data/" + std::to_string(iteration) + "/" +
                          std::to_string(sample) + "/" + what;
  return std::mt19937(static_cast<uint32_t>(events::fnv1a64(key) & 0xffffffffu));
}

// at::uniform_real_distribution<float>(0, 1): the low 24 bits of one 32-bit draw, x 2^-24.
float uniformFloat(std::mt19937& gen) {
  const uint32_t v = static_cast<uint32_t>(gen());
  return static_cast<float>(static_cast<double>(v & ((1u << 24) - 1)) * (1.0 / (1u << 24)));
}

// ATen's normal_fill_16 (scalar): Box-Muller over data[0..8) and data[8..16), float arithmetic
// but theta formed in double (2.0f * pi<double> * u2) and rounded to float.
void normalFill16(float* data) {
  constexpr double kPi = 3.14159265358979323846;
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1 - data[j];
    const float u2 = data[j + 8];
    const float radius = std::sqrt(-2 * std::log(u1));
    const float theta = static_cast<float>(2.0f * kPi * u2);
    data[j] = radius * std::cos(theta) * 1.0f + 0.0f;
    data[j + 8] = radius * std::sin(theta) * 1.0f + 0.0f;
  }
}

}  // namespace

std::vector<int64_t> regenerateTokens(uint64_t seed, int iteration, int64_t sample, int textLen,
                                      int vocab) {
  // at::randint(vocab, ...) on the CPU: one 32-bit draw per element, in order, modulo the range.
  std::mt19937 gen = generatorFor(seed, iteration, sample, "tokens");
  std::vector<int64_t> out(static_cast<size_t>(textLen) + 1);
  for (auto& t : out)
    t = static_cast<int64_t>(static_cast<uint32_t>(gen()) % static_cast<uint32_t>(vocab));
  return out;
}

std::optional<std::vector<float>> regeneratePatches(uint64_t seed, int iteration, int64_t sample,
                                                    const std::string& encoder, int patches,
                                                    int patchDim) {
  const int64_t size = static_cast<int64_t>(patches) * patchDim;
  if (size < 16) return std::nullopt;
  std::mt19937 gen = generatorFor(seed, iteration, sample, "patches/" + encoder);
  // ATen's normal_fill: every element a uniform draw, Box-Muller in blocks of 16, and when the
  // size is not a multiple of 16 the last 16 elements drawn again and transformed again.
  std::vector<float> data(static_cast<size_t>(size));
  for (auto& v : data) v = uniformFloat(gen);
  for (int64_t i = 0; i + 16 <= size; i += 16) normalFill16(data.data() + i);
  if (size % 16 != 0) {
    float* tail = data.data() + size - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniformFloat(gen);
    normalFill16(tail);
  }
  return data;
}

}  // namespace stagescope::analysis
