#include "core/analysis/GradientRatio.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/analysis/RunSetup.h"

namespace stagescope::analysis {
namespace {

constexpr double kUniform = 1e-3;  // per-parameter ratios within this of each other
constexpr double kNotOne = 1e-3;   // and this far from 1

// Each module's dp size and the language model's, from the run's recorded settings (a captured
// job's from the layout it declared: RunSetup.h); empty when unknown.
struct DpSizes {
  std::map<std::string, int> dp;
  int llm = 0;
  // d_L / d_E of `module` (1 for the language model itself), -1 when unknown.
  double factor(const std::string& module) const {
    const auto it = dp.find(module);
    if (it == dp.end() || llm <= 0 || it->second <= 0) return -1;
    return static_cast<double>(llm) / it->second;
  }
};

DpSizes dpSizesOf(const model::RunModel& run) {
  DpSizes out;
  const RunSetup setup = runSetupOf(run);
  if (!setup.known) return out;
  for (const auto& m : setup.settings.modules) {
    out.dp[m.name] = m.dp;
    if (m.kind == events::ModuleKind::Llm) out.llm = m.dp;
  }
  return out;
}

// "vision mean, llm per_token" when `run` recorded (events/ModuleStep.h) a loss normalisation for
// `module` that differs from its language model's, else "": then a factor equal to d_L/d_E may
// as well be that mismatch (GradientAudit.h tells them apart within the run).
std::string mixedNormalisation(const model::RunModel& run, const std::string& module) {
  std::string llm;
  const RunSetup setup = runSetupOf(run);
  for (const auto& m : setup.settings.modules)
    if (m.kind == events::ModuleKind::Llm) llm = m.name;
  auto normalisationOf = [&](const std::string& name) {
    for (const auto& s : run.moduleSteps)
      if (s.hasReduction() && s.module.str() == name) return s.normalisation;
    return events::LossNormalisation::Unknown;
  };
  const auto mine = normalisationOf(module), lang = normalisationOf(llm);
  if (llm.empty() || module == llm || mine == events::LossNormalisation::Unknown ||
      lang == events::LossNormalisation::Unknown || mine == lang)
    return "";
  return module + " " + toString(mine) + ", " + llm + " " + toString(lang);
}

std::string moduleOf(const std::string& param) {
  return param.substr(0, param.find('.'));
}

std::string fraction(double x) {
  std::ostringstream o;
  if (x >= 1 && std::fabs(x - std::round(x)) < 1e-9) {
    o << std::llround(x);
  } else if (x < 1 && std::fabs(1 / x - std::round(1 / x)) < 1e-9) {
    o << "1/" << std::llround(1 / x);
  } else {
    o.precision(4);
    o << x;
  }
  return o.str();
}

}  // namespace

std::vector<UniformRatio> uniformGradientRatios(const std::vector<GradRow>& rows,
                                                const model::RunModel& a,
                                                const model::RunModel& b) {
  std::map<std::pair<std::string, int>, std::vector<double>> ratios;
  for (const auto& r : rows) {
    if (!r.hasA || !r.hasB || !(r.normB > 0) || !std::isfinite(r.normA)) continue;
    ratios[{moduleOf(r.param), r.iteration}].push_back(r.normA / r.normB);
  }
  const DpSizes da = dpSizesOf(a), db = dpSizesOf(b);
  std::vector<UniformRatio> out;
  for (const auto& [key, rs] : ratios) {
    const auto [lo, hi] = std::minmax_element(rs.begin(), rs.end());
    if (!(*lo > 0)) continue;
    UniformRatio u;
    u.module = key.first;
    u.iteration = key.second;
    u.parameters = static_cast<int>(rs.size());
    u.spread = *hi / *lo - 1;
    double sum = 0;
    for (double x : rs) sum += x;
    u.ratio = sum / static_cast<double>(rs.size());
    if (u.spread > kUniform || std::fabs(u.ratio - 1) <= kNotOne) continue;
    const double fa = da.factor(u.module), fb = db.factor(u.module);
    if (fa > 0 && fb > 0) u.expected = fa / fb;
    std::ostringstream s;
    s.precision(6);
    s << u.module << ": A's gradients are " << u.ratio << " x B's in all " << u.parameters
      << " of its parameters in iteration " << u.iteration << " (by norms; the ratios agree to "
      << u.spread << ")";
    const std::string mixedA = mixedNormalisation(a, u.module);
    const std::string mixedB = mixedNormalisation(b, u.module);
    if (u.expected > 0 && std::fabs(u.ratio / u.expected - 1) <= kUniform &&
        !(mixedA.empty() && mixedB.empty())) {
      s << " — equal to the data-parallel factor d_L/d_E (" << fraction(fa) << " in A's layout, "
        << fraction(fb) << " in B's), but the modules normalise the loss differently in "
        << (mixedA.empty() ? "B (" + mixedB : "A (" + mixedA)
        << "): not necessarily §7.1; check on that run audits its reduction and names the cause";
    } else if (u.expected > 0 && std::fabs(u.ratio / u.expected - 1) <= kUniform) {
      s << " — the data-parallel factor d_L/d_E: " << fraction(fa) << " in A's layout, "
        << fraction(fb) << " in B's (§7.1: an encoder's gradients averaged over its own dp "
        << "group instead of summed and divided by the language model's dp)";
    } else if (u.expected > 0) {
      s << " — not the layouts' data-parallel factor (" << fraction(u.expected)
        << "): a scale error of its own";
    }
    u.sentence = s.str();
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace stagescope::analysis
