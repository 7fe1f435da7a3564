#include "core/analysis/LossScale.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

namespace stagescope::analysis {

namespace {

std::string num(double v) {
  std::ostringstream o;
  o.precision(6);
  o << v;
  return o.str();
}

// One module's loss-scale facts in one iteration, over its replicas' rows.
struct ModuleScale {
  double scale = NAN, after = NAN;
  bool scaleSplit = false, afterSplit = false;  // its own replicas disagree
  bool foundInf = false, stepped = false, skipped = false;
  int rank = -1;
};

// NaN-aware equality of two recorded scales (a scale is a power of two: exact).
bool same(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

void merge(double v, double* slot, bool* split) {
  if (std::isnan(v)) return;
  if (std::isnan(*slot))
    *slot = v;
  else if (*slot != v)
    *split = true;
}

}  // namespace

std::string LossScaleReport::summary() const {
  if (iterations == 0) return "";
  std::ostringstream s;
  s << "loss scale: " << modules << " modules in " << iterations << " iterations judged for one "
    << "scale";
  if (!overflows.empty()) {
    s << "; " << overflows.size() << " overflow" << (overflows.size() == 1 ? "" : "s")
      << " handled (an event, not a failure):";
    const char* sep = " ";
    for (const auto& o : overflows) {
      s << sep << "iteration " << o.iteration << ": ";
      for (size_t i = 0; i < o.modules.size(); ++i) s << (i ? ", " : "") << o.modules[i];
      s << " found Inf/NaN, every module skipped the step";
      sep = "; ";
    }
  }
  return s.str();
}

bool LossScaleReport::handledOverflow(int iteration, const std::string& module) const {
  return std::any_of(overflows.begin(), overflows.end(), [&](const HandledOverflow& o) {
    return o.iteration == iteration &&
           std::find(o.modules.begin(), o.modules.end(), module) != o.modules.end();
  });
}

LossScaleReport judgeLossScales(const model::RunModel& run) {
  LossScaleReport out;
  std::map<int, std::map<std::string, ModuleScale>> byIteration;
  for (const auto& r : run.moduleSteps) {
    if (!r.hasLossScale()) continue;
    auto& m = byIteration[r.iteration][r.module.str()];
    merge(r.lossScale, &m.scale, &m.scaleSplit);
    merge(r.lossScaleAfter, &m.after, &m.afterSplit);
    m.foundInf = m.foundInf || r.foundInf == 1;
    m.stepped = m.stepped || r.skipped == 0;
    m.skipped = m.skipped || r.skipped == 1;
    if (m.rank < 0) m.rank = r.rank;
  }
  if (byIteration.empty()) return out;
  std::string llm;
  for (const auto& m : run.info.modules)
    if (m.isLlm()) llm = m.name;
  std::set<std::string> modules;
  bool parted = false;  // the previous iteration's scales already differed
  for (const auto& [iteration, mods] : byIteration) {
    for (const auto& [name, m] : mods) modules.insert(name);
    // The reference scale: the language model's (it scales the loss), else the first module's.
    const auto refIt = mods.count(llm) ? mods.find(llm) : mods.begin();
    const std::string& ref = refIt->first;
    const ModuleScale& r = refIt->second;
    std::vector<std::string> found;
    for (const auto& [name, m] : mods)
      if (m.foundInf) found.push_back(name);
    auto foundText = [&] {
      std::string t;
      for (size_t i = 0; i < found.size(); ++i) t += (i ? ", " : "") + found[i];
      return t;
    };
    bool partsNow = false;
    for (const auto& [name, m] : mods) {
      if (m.scaleSplit || m.afterSplit) {
        out.findings.push_back({iteration, name, m.rank,
                                "iteration " + std::to_string(iteration) + ": " + name +
                                    "'s replicas recorded different loss scales"});
      }
      if (name == ref) continue;
      const bool before = !same(m.scale, r.scale);
      const bool after = !same(m.after, r.after);
      if (!before && !after) continue;
      partsNow = true;
      if (parted && before) continue;  // named where they parted
      std::ostringstream o;
      o << "iteration " << iteration << ": ";
      if (before)
        o << name << "'s loss scale is " << num(m.scale) << " where " << ref << "'s is "
          << num(r.scale) << ": " << ref << " scales the loss by " << num(r.scale) << ", " << name
          << " unscales its gradients by " << num(m.scale) << " (x " << num(r.scale / m.scale)
          << " on every " << name << " gradient)";
      else
        o << "the loss scales part in this step's scaler update: " << name << "'s becomes "
          << num(m.after) << ", " << ref << "'s " << num(r.after) << " (from " << num(m.scale)
          << ")";
      if (!found.empty())
        o << "; " << foundText() << " found Inf/NaN in its own gradients"
          << (found.size() == mods.size() ? "" : ", the others did not")
          << ": each module's scaler updated from its own found-inf, not the world's "
          << "(Megatron-Bridge PR #5591: one update from the world-wide found-inf)";
      o << "; one model needs one loss scale";
      out.findings.push_back({iteration, name, m.rank, o.str()});
    }
    parted = partsNow;
    if (!found.empty()) {
      std::vector<std::string> stepped;
      for (const auto& [name, m] : mods)
        if (m.stepped) stepped.push_back(name);
      if (stepped.empty()) {
        out.overflows.push_back({iteration, found});
      } else {
        for (const auto& name : stepped)
          out.findings.push_back(
              {iteration, name, mods.at(name).rank,
               "iteration " + std::to_string(iteration) + ": " + name +
                   " took its optimizer step although " + foundText() +
                   " found Inf/NaN in its gradients: the skip decision must be the world's"});
      }
    }
  }
  out.iterations = static_cast<int>(byIteration.size());
  out.modules = static_cast<int>(modules.size());
  return out;
}

}  // namespace stagescope::analysis
