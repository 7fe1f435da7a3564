#include "core/plan/ConfigFields.h"

#include "core/events/Checksum.h"

#include <cstdio>

namespace stagescope::plan {
namespace {

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

template <typename T>
std::string list(const std::vector<T>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) s += ",";
    if constexpr (std::is_same_v<T, std::string>)
      s += values[i];
    else
      s += std::to_string(values[i]);
  }
  return s + "]";
}

void addModule(std::vector<ConfigField>& f, const ModuleConfig& m) {
  const std::string k = "modules." + m.name + ".";
  f.emplace_back(k + "kind", events::toString(m.kind));
  for (auto [name, v] : {std::pair{"tp", m.tp},
                         {"cp", m.cp},
                         {"pp", m.pp},
                         {"dp", m.dp},
                         {"offset", m.offset},
                         {"layers", m.layers},
                         {"hidden", m.hidden},
                         {"heads", m.heads},
                         {"ffn", m.ffn},
                         {"patches", m.patches},
                         {"patch_dim", m.patchDim},
                         {"vocab", m.vocab},
                         {"text_len", m.textLen}})
    f.emplace_back(k + name, std::to_string(v));
  f.emplace_back(k + "stage_layers", list(m.stageLayers));
}

void addFault(std::vector<ConfigField>& f, size_t i, const FaultConfig& x) {
  const std::string k = "faults[" + std::to_string(i) + "].";
  f.emplace_back(k + "kind", toString(x.kind));
  f.emplace_back(k + "iteration", std::to_string(x.iteration));
  f.emplace_back(k + "microbatch", std::to_string(x.microbatch));
  f.emplace_back(k + "module", x.module);
  f.emplace_back(k + "stage", std::to_string(x.stage));
  f.emplace_back(k + "direction", events::toString(x.direction));
  f.emplace_back(k + "rank", std::to_string(x.rank));
  f.emplace_back(k + "delay_seconds", num(x.delaySeconds));
}

}  // namespace

std::vector<ConfigField> canonicalFields(const RunConfig& c) {
  std::vector<ConfigField> f = {
      {"seed", std::to_string(c.seed)},
      {"iterations", std::to_string(c.iterations)},
      {"microbatches", std::to_string(c.microbatches)},
      {"micro_batch_size", std::to_string(c.microBatchSize)},
      {"dtype", events::toString(c.dtype)},
      {"device", toString(c.device)},
      {"backend", toString(c.backend)},
      {"loss_scale", num(c.lossScale)},
      {"forward_only", c.forwardOnly ? "true" : "false"},
      {"world_size", std::to_string(c.worldSize)},
      {"optimizer.kind", events::toString(c.optimizer.kind)},
      {"optimizer.lr", num(c.optimizer.lr)},
      {"optimizer.momentum", num(c.optimizer.momentum)},
      {"optimizer.beta1", num(c.optimizer.beta1)},
      {"optimizer.beta2", num(c.optimizer.beta2)},
      {"optimizer.eps", num(c.optimizer.eps)},
      {"optimizer.weight_decay", num(c.optimizer.weightDecay)},
      {"record.level", events::toString(c.record.level)},
      {"record.iterations", list(c.record.iterations)},
      {"record.modules", list(c.record.modules)},
      {"record.ranks", list(c.record.ranks)},
      {"modules", std::to_string(c.modules.size())},
  };
  for (const auto& m : c.modules) addModule(f, m);
  f.emplace_back("faults", std::to_string(c.faults.size()));
  for (size_t i = 0; i < c.faults.size(); ++i) addFault(f, i, c.faults[i]);
  return f;
}

std::string canonicalText(const std::vector<ConfigField>& fields) {
  std::string s;
  for (const auto& [k, v] : fields) s += k + " = " + v + "\n";
  return s;
}

std::string configHash(const RunConfig& cfg) {
  const uint64_t h = events::fnv1a64(canonicalText(canonicalFields(cfg)));  // standard FNV-1a 64
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace stagescope::plan
