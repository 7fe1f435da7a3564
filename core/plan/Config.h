// The run configuration: one TOML file (assets/configs/*.toml), parsed and validated before
// any rank starts.  Torch-free.
//
// Contract: parseConfig() either returns a RunConfig that every later stage can trust
// (grids fit the world, every rank in at least one module, grids overlap only as whole
// stages in an order without deadlock (Colocation.h), all divisibility rules hold) or throws
// ConfigError whose message names the field, the value and what was expected, e.g.
//   "config.toml: modules.vision.dp = 3: the llm dp (2) and this dp must divide one another"
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/events/Events.h"
#include "core/events/Limits.h"

namespace stagescope::plan {

// Bounds every config value is checked against before anything is sized by it (docs/config.md
// "Limits").  They keep every derived quantity (world size, batch, tensor sizes, the plan)
// inside 64-bit arithmetic and the plan itself small; whether a config fits this machine is
// the resource estimate's job (core/plan/MemoryEstimate.h).  The ones a run file also
// records are shared with its reader (core/events/Limits.h).
namespace limits {
constexpr int64_t kMaxWorldSize = events::limits::kMaxWorldSize;  // offset + tp*cp*pp*dp
constexpr int64_t kMaxIterations = events::limits::kMaxIterations;
constexpr int64_t kMaxMicrobatches = events::limits::kMaxMicrobatches;  // per iteration
constexpr int64_t kMaxPlannedMicrobatches = 1 << 17;  // world_size * microbatches (plan size)
constexpr int64_t kMaxMicroBatchSize = 1 << 20;       // micro_batch_size
constexpr int64_t kMaxGlobalBatch = 2'147'483'647;    // microbatches * micro_batch_size * llm dp
constexpr int64_t kMaxWidth = 1 << 20;     // hidden, ffn, heads, patches, patch_dim, text_len
constexpr int64_t kMaxLayers = 65'536;     // layers of one module
constexpr int64_t kMaxVocab = 1 << 24;     // vocab
constexpr int64_t kMaxSequence = 1 << 20;  // llm sequence: text_len + sum of encoder patches
constexpr int64_t kMaxElements = events::limits::kMaxElements;  // one weight set or tensor
constexpr double kMinTimeoutSeconds = 0.001;                    // timeout_seconds (1 ms) ...
constexpr double kMaxTimeoutSeconds = 86'400;  // ... to 1 day; also the bound of delay_seconds
constexpr int64_t kMaxConfigBytes = 16 << 20;  // size of a config file
}  // namespace limits

class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string field, const std::string& message)
      : std::runtime_error(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }  // dotted path, e.g. "modules.vision.tp"

 private:
  std::string field_;
};

// Closed vocabularies of the config only the record side uses (those the run file and the
// read side share are in core/events: ModuleKind, Dtype, OptimizerKind, RecordLevel).  Each is
// parsed once, by parseConfig; everything else compares the enum and prints toString().  The
// enumerators are in the order the config's error messages list them.
enum class Device : uint8_t { Cpu = 0, Cuda };
enum class Backend : uint8_t { Gloo = 0, Nccl };
enum class FaultKind : uint8_t { Delay = 0, Drop, Corrupt, Shape, Nan, Inf, Kill };
const char* toString(Device d);
const char* toString(Backend b);
const char* toString(FaultKind k);
// The fault kind named `text` (the config's faults[i].kind and the command line's --fault).
bool parseFaultKind(const std::string& text, FaultKind* out);

// One module of the multimodal model ([[modules]] table in TOML).
struct ModuleConfig {
  std::string name;  // unique; used as the dict key between stages
  events::ModuleKind kind = events::ModuleKind::Encoder;  // parsed once, from encoder|llm
  int tp = 1, cp = 1, pp = 1, dp = 1;
  int offset = 0;                // first global rank of this module's grid
  int layers = 2;                // transformer blocks
  std::vector<int> stageLayers;  // optional explicit split over pp (sums to layers)
  int hidden = 32;
  int heads = 4;
  int ffn = 64;
  // encoder only
  int patches = 4;
  int patchDim = 8;
  // llm only
  int vocab = 64;
  int textLen = 8;

  bool isLlm() const { return kind == events::ModuleKind::Llm; }
  bool isEncoder() const { return kind == events::ModuleKind::Encoder; }
  int size() const { return tp * cp * pp * dp; }
  bool contains(int rank) const { return rank >= offset && rank < offset + size(); }
  // Number of layers held by pipeline stage `stage`.
  int layersOfStage(int stage) const;
  int firstLayerOfStage(int stage) const;
};

struct OptimizerConfig {
  events::OptimizerKind kind = events::OptimizerKind::Sgd;  // parsed once, from sgd|adam
  double lr = 0.01;
  double momentum = 0.0;                          // sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam
  double weightDecay = 0.0;
};

// Which records to keep (see docs/run-file.md).
struct RecordConfig {
  events::RecordLevel level = events::RecordLevel::Stats;  // parsed once, from off|meta|stats|full
  std::vector<int> iterations;                             // empty: all
  std::vector<std::string> modules;                        // empty: all
  std::vector<int> ranks;                                  // empty: all
  // level != off and filter().keeps(iteration, module, rank): the one filter rule.
  bool wants(int iteration, const std::string& module, int rank) const;
  events::RecordFilter filter() const { return {iterations, modules, ranks}; }
};

// A fault to inject (debugging issue); empty by default.
struct FaultConfig {
  FaultKind kind = FaultKind::Delay;  // parsed once, from delay|drop|corrupt|shape|nan|inf|kill
  int iteration = 0;
  int microbatch = 0;
  std::string module;  // the sending module (or the module whose rank is killed)
  int stage = -1;      // pp index within the module; -1 = last stage
  events::Direction direction = events::Direction::Activation;  // from activation|gradient
  int rank = -1;  // kill: the global rank (overrides module/stage)
  double delaySeconds = 0;
};

struct RunConfig {
  std::string sourceName;  // file name for messages
  std::string text;        // the TOML text after overrides
  uint64_t seed = 1234;
  int iterations = 2;
  int microbatches = 4;                          // m, per iteration
  int microBatchSize = 2;                        // llm micro-batch size per DP replica
  events::Dtype dtype = events::Dtype::Float32;  // parsed once, from float32|bfloat16
  Device device = Device::Cpu;                   // parsed once, from cpu|cuda
  Backend backend = Backend::Gloo;               // parsed once, from gloo|nccl
  double timeoutSeconds = 60;                    // every blocking wait
  double lossScale = 1.0;  // constant loss scale, applied once per microbatch on the last stage
  bool forwardOnly = false;
  int worldSize = 0;  // derived: max(offset + size); a given world_size must equal it
  std::vector<ModuleConfig> modules;  // config order; encoders first by convention
  OptimizerConfig optimizer;
  RecordConfig record;
  std::vector<FaultConfig> faults;

  const ModuleConfig& module(const std::string& name) const;
  const ModuleConfig& llm() const;
  std::vector<const ModuleConfig*> encoders() const;  // config order
  // The modules whose grids hold `rank` (config order; several when modules are colocated).
  std::vector<const ModuleConfig*> modulesOfRank(int rank) const;
  // Micro-batch size of an encoder replica: microBatchSize * llm.dp / enc.dp.
  int encoderMicroBatchSize(const ModuleConfig& enc) const;
  // Global batch per iteration: microbatches * microBatchSize * llm.dp.
  int globalBatch() const { return microbatches * microBatchSize * llm().dp; }
};

// Parses and validates.  `overrides` are "key=value" pairs applied before validation
// (dotted keys; "modules.NAME.field" addresses a module by name).
RunConfig parseConfig(const std::string& text, const std::string& sourceName,
                      const std::vector<std::string>& overrides = {});
RunConfig loadConfig(const std::string& path, const std::vector<std::string>& overrides = {});
// The text of the config file at `path`; throws ConfigError when it is missing, not a regular
// file, unreadable or larger than limits::kMaxConfigBytes.
std::string readConfigFile(const std::string& path);

}  // namespace stagescope::plan
