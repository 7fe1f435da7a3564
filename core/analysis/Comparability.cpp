#include "core/analysis/Comparability.h"

#include <map>

#include "core/analysis/Format.h"
#include "core/analysis/RunSetup.h"
#include "core/events/CapturedLayout.h"

namespace stagescope::analysis {

namespace {

std::string pair(const std::string& what, const std::string& a, const std::string& b,
                 const std::string& la, const std::string& lb) {
  return what + " " + a + " in " + la + ", " + b + " in " + lb;
}

// The first module setting that differs, or "".
std::string moduleDifference(const events::RunSettings& a, const events::RunSettings& b,
                             const std::string& la, const std::string& lb) {
  std::map<std::string, const events::ModuleSettings*> inB;
  for (const auto& m : b.modules) inB[m.name] = &m;
  for (const auto& m : a.modules) {
    auto it = inB.find(m.name);
    if (it == inB.end()) return "module " + m.name + " is only in " + la;
    const auto& o = *it->second;
    const std::string mod = "module " + m.name + ": ";
    if (m.kind != o.kind)
      return pair(mod + "kind", events::toString(m.kind), events::toString(o.kind), la, lb);
    if (m.vocab != o.vocab)
      return pair(mod + "vocab", std::to_string(m.vocab), std::to_string(o.vocab), la, lb);
    if (m.textLen != o.textLen)
      return pair(mod + "text_len", std::to_string(m.textLen), std::to_string(o.textLen), la, lb);
    if (m.patches != o.patches)
      return pair(mod + "patches", std::to_string(m.patches), std::to_string(o.patches), la, lb);
    if (m.patchDim != o.patchDim)
      return pair(mod + "patch_dim", std::to_string(m.patchDim), std::to_string(o.patchDim), la,
                  lb);
    inB.erase(it);
  }
  if (!inB.empty()) return "module " + inB.begin()->first + " is only in " + lb;
  return "";
}

// Each parameter's full shape, from any record that carries it.
std::map<std::string, events::Shape> fullShapes(const model::RunModel& run) {
  std::map<std::string, events::Shape> out;
  for (const auto& g : run.gradients)
    if (!g.fullShape.empty()) out.emplace(std::string(g.param), g.fullShape);
  return out;
}

}  // namespace

std::string whyNotComparable(const model::RunModel& a, const model::RunModel& b,
                             const std::string& labelA, const std::string& labelB) {
  if (a.info.captured() || b.info.captured()) return "";
  const RunSetup sa = runSetupOf(a), sb = runSetupOf(b);
  if (sa.known && sb.known) {
    if (sa.settings.seed != sb.settings.seed)
      return "not the same data: " + pair("seed", std::to_string(sa.settings.seed),
                                          std::to_string(sb.settings.seed), labelA, labelB);
    if (std::string d = moduleDifference(sa.settings, sb.settings, labelA, labelB); !d.empty())
      return "not the same model: " + d;
  }
  const auto shapesB = fullShapes(b);
  for (const auto& [param, shape] : fullShapes(a)) {
    auto it = shapesB.find(param);
    if (it != shapesB.end() && it->second != shape)
      return "not the same model: " + pair("parameter " + param + " is", formatShape(shape.vec()),
                                           formatShape(it->second.vec()), labelA, labelB);
  }
  return "";
}

}  // namespace stagescope::analysis
