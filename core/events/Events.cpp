#include "core/events/Events.h"

#include <algorithm>
#include <array>

namespace stagescope::events {
namespace {
constexpr std::array<const char*, static_cast<size_t>(ActionKind::Count)> kActionNames = {
    "F", "B", "RF", "SF", "RB", "SB", "SF_RB", "SB_RF", "DP_REDUCE", "OPT_STEP"};

template <typename Enum, size_t N>
bool parseFrom(const std::array<const char*, N>& names, const std::string& text, Enum* out) {
  for (size_t i = 0; i < N; ++i) {
    if (text == names[i]) {
      *out = static_cast<Enum>(i);
      return true;
    }
  }
  return false;
}
constexpr std::array<const char*, 5> kStatusNames = {"running", "completed", "failed", "hung",
                                                     "killed"};
constexpr std::array<const char*, 4> kLevelNames = {"off", "meta", "stats", "full"};
constexpr std::array<const char*, 2> kModuleKindNames = {"encoder", "llm"};
constexpr std::array<const char*, 3> kDtypeNames = {"float32", "bfloat16", "float64"};
constexpr std::array<const char*, 2> kOptimizerNames = {"sgd", "adam"};
}  // namespace

const char* toString(ActionKind kind) {
  auto i = static_cast<size_t>(kind);
  return i < kActionNames.size() ? kActionNames[i] : "?";
}
const char* toString(Direction d) {
  return d == Direction::Activation ? "activation" : "gradient";
}
const char* toString(EdgeKind k) {
  return k == EdgeKind::P2P ? "p2p" : "bridge";
}
const char* toString(BridgeRole r) {
  switch (r) {
    case BridgeRole::None:
      return "none";
    case BridgeRole::OneToOne:
      return "one_to_one";
    case BridgeRole::FanIn:
      return "fan_in";
    case BridgeRole::FanOut:
      return "fan_out";
  }
  return "?";
}
const char* toString(Side s) {
  return s == Side::Send ? "send" : "recv";
}
const char* toString(GradPhase p) {
  switch (p) {
    case GradPhase::Accumulated:
      return "accumulated";
    case GradPhase::Reduced:
      return "reduced";
    case GradPhase::ParamAfterStep:
      return "param_after_step";
    case GradPhase::ParamInitial:
      return "param_initial";
    case GradPhase::Reference:
      return "reference";
  }
  return "?";
}
const char* toString(RunStatus s) {
  return kStatusNames[static_cast<size_t>(s)];
}
bool parseRunStatus(const std::string& text, RunStatus* out) {
  return parseFrom(kStatusNames, text, out);
}
const char* toString(RecordLevel l) {
  return kLevelNames[static_cast<size_t>(l)];
}
bool parseRecordLevel(const std::string& text, RecordLevel* out) {
  return parseFrom(kLevelNames, text, out);
}
const char* toString(ModuleKind k) {
  return kModuleKindNames[static_cast<size_t>(k)];
}
bool parseModuleKind(const std::string& text, ModuleKind* out) {
  return parseFrom(kModuleKindNames, text, out);
}
const char* toString(Dtype d) {
  return kDtypeNames[static_cast<size_t>(d)];
}
bool parseDtype(const std::string& text, Dtype* out) {
  return parseFrom(kDtypeNames, text, out);
}
const char* toString(OptimizerKind k) {
  return kOptimizerNames[static_cast<size_t>(k)];
}
bool parseOptimizerKind(const std::string& text, OptimizerKind* out) {
  return parseFrom(kOptimizerNames, text, out);
}

namespace {
constexpr std::array<const char*, 2> kRunOriginNames = {"engine", "captured"};
}  // namespace
const char* toString(RunOrigin origin) {
  return kRunOriginNames[static_cast<size_t>(origin)];
}
bool parseRunOrigin(const std::string& text, RunOrigin* out) {
  return parseFrom(kRunOriginNames, text, out);
}

namespace {
constexpr std::array<const char*, 4> kWaitOpNames = {"recv", "send", "broadcast", "collective"};
template <typename T>
bool listKeeps(const std::vector<T>& list, const T& x) {
  return list.empty() || std::find(list.begin(), list.end(), x) != list.end();
}
}  // namespace

const char* toString(WaitOp op) {
  return kWaitOpNames[static_cast<size_t>(op)];
}
bool parseWaitOp(const std::string& text, WaitOp* out) {
  return parseFrom(kWaitOpNames, text, out);
}

bool RecordFilter::keepsRank(int32_t rank, const std::string& module) const {
  return listKeeps(ranks, rank) && listKeeps(modules, module);
}
bool RecordFilter::keepsIteration(int32_t iteration) const {
  return listKeeps(iterations, iteration);
}

}  // namespace stagescope::events
