#include "core/analysis/OptimizerStep.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "core/analysis/RunSetup.h"
#include "core/analysis/Tolerance.h"
#include "core/analysis/Values.h"

namespace stagescope::analysis {
namespace {

using events::GradPhase;
using Key = std::pair<int, std::string>;  // (iteration, param)

constexpr double kUlp = 1.0 / (1 << 23);   // float32 unit roundoff bound (2^-23)
constexpr double kBase = 1.0 / (1 << 21);  // x max(1, max |p|): four ulps at magnitude 1
constexpr double kRoundingFactor = 4.0;    // safety on the first-order rounding bound

// Whole tensors with values, by (iteration, param).
std::map<Key, const GatheredGradient*> byKey(const std::vector<GatheredGradient>& list) {
  std::map<Key, const GatheredGradient*> out;
  for (const auto& g : list) {
    if (g.complete && g.hasValues) out[{g.iteration, g.param}] = &g;
  }
  return out;
}

// One parameter's optimizer state, elementwise, with a bound on how far float32 rounding may
// have moved it (absolute, per element).
struct State {
  int steps = 0;
  std::vector<float> m, v;     // Adam moments, or the SGD momentum buffer in m
  std::vector<double> dm, dv;  // their rounding bounds
};

// Applies one step to `p` with gradient `g` (float32, in the order the LibTorch optimizer
// applies its tensor operations) and returns the stepped values and their rounding bounds.
struct Stepped {
  std::vector<double> value, bound;
};

Stepped stepAdam(const events::OptimizerSettings& o, State& s, const std::vector<double>& p,
                 const std::vector<double>& g) {
  const size_t n = p.size();
  if (s.m.empty()) s.m.assign(n, 0), s.v.assign(n, 0), s.dm.assign(n, 0), s.dv.assign(n, 0);
  ++s.steps;
  const double c1 = 1 - std::pow(o.beta1, s.steps), c2 = 1 - std::pow(o.beta2, s.steps);
  const float b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2);
  const float a1 = static_cast<float>(1 - o.beta1), a2 = static_cast<float>(1 - o.beta2);
  const float wd = static_cast<float>(o.weightDecay), eps = static_cast<float>(o.eps);
  const float sqrtC2 = static_cast<float>(std::sqrt(c2));
  const double stepSize = o.lr / c1;
  Stepped out{std::vector<double>(n), std::vector<double>(n)};
  for (size_t i = 0; i < n; ++i) {
    const float pf = static_cast<float>(p[i]), gf = static_cast<float>(g[i]);
    const float x = wd != 0 ? std::fma(wd, pf, gf) : gf;  // grad.add(p, weight_decay)
    const double dx = wd != 0 ? kUlp * (std::fabs(gf) + std::fabs(wd * pf)) : 0;
    s.m[i] = std::fma(x, a1, s.m[i] * b1);  // exp_avg.mul_(beta1).add_(grad, 1 - beta1)
    s.v[i] = s.v[i] * b2 + a2 * x * x;      // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1-beta2)
    s.dm[i] = o.beta1 * s.dm[i] + (1 - o.beta1) * dx + 2 * kUlp * std::fabs(s.m[i]);
    s.dv[i] =
        o.beta2 * s.dv[i] + (1 - o.beta2) * (2 * std::fabs(x) * dx + dx * dx) + 3 * kUlp * s.v[i];
    const float sq = std::sqrt(s.v[i]);
    const float den = sq / sqrtC2 + eps;  // (exp_avg_sq.sqrt() / sqrt(bc2)).add_(eps)
    const double dsq =
        (sq > 0 ? std::min(s.dv[i] / (2.0 * sq), std::sqrt(s.dv[i])) : std::sqrt(s.dv[i])) +
        kUlp * sq;
    const double dden = dsq / sqrtC2 + 2 * kUlp * den;
    const float update = static_cast<float>(-stepSize) * (s.m[i] / den);  // addcdiv_
    out.value[i] = static_cast<double>(pf + update);
    const double du = stepSize * (s.dm[i] / den + std::fabs(s.m[i]) * dden / (den * den)) +
                      2 * kUlp * std::fabs(update);
    out.bound[i] = du;
  }
  return out;
}

Stepped stepSgd(const events::OptimizerSettings& o, State& s, const std::vector<double>& p,
                const std::vector<double>& g) {
  const size_t n = p.size();
  const float wd = static_cast<float>(o.weightDecay), mu = static_cast<float>(o.momentum);
  const float lr = static_cast<float>(-o.lr);
  const bool first = s.steps++ == 0;
  if (o.momentum != 0 && first) s.m.assign(n, 0), s.dm.assign(n, 0);
  Stepped out{std::vector<double>(n), std::vector<double>(n)};
  for (size_t i = 0; i < n; ++i) {
    const float pf = static_cast<float>(p[i]), gf = static_cast<float>(g[i]);
    float d = wd != 0 ? std::fma(wd, pf, gf) : gf;  // d_p.add(p, weight_decay)
    double dd = wd != 0 ? kUlp * (std::fabs(gf) + std::fabs(wd * pf)) : 0;
    if (o.momentum != 0) {
      // First step: buf = d_p; then buf.mul_(momentum).add_(d_p, 1 - dampening (0)).
      s.m[i] = first ? d : s.m[i] * mu + d;
      s.dm[i] = (first ? 0 : o.momentum * s.dm[i]) + dd + 2 * kUlp * std::fabs(s.m[i]);
      d = s.m[i];
      dd = s.dm[i];
    }
    out.value[i] = static_cast<double>(std::fma(d, lr, pf));  // p.add_(d_p, -lr)
    out.bound[i] = o.lr * dd + kUlp * std::fabs(o.lr * d);
  }
  return out;
}

std::string describe(const events::OptimizerSettings& o) {
  std::ostringstream s;
  s.precision(6);
  const bool adam = o.kind == events::OptimizerKind::Adam;
  s << events::toString(o.kind) << " lr " << o.lr;
  if (adam) s << " betas (" << o.beta1 << ", " << o.beta2 << ") eps " << o.eps;
  if (!adam && o.momentum != 0) s << " momentum " << o.momentum;
  if (o.weightDecay != 0) s << " weight_decay " << o.weightDecay;
  return s.str();
}

// Compares the stepped values with the recorded ones; a mismatch names the element furthest
// outside its bound.
void compare(const Stepped& want, const GatheredGradient& got, int iteration, StepJudgement& out) {
  double maxAbs = 1;
  for (double x : want.value) maxAbs = std::max(maxAbs, std::fabs(x));
  const double base = kBase * maxAbs;
  StepMismatch worst;
  double worstExcess = 0;
  for (size_t i = 0; i < want.value.size(); ++i) {
    const double bound = base + kRoundingFactor * want.bound[i];
    const double diff = std::fabs(got.values[i] - want.value[i]);
    if (diff <= bound) continue;  // NaN fails here too
    ++worst.outside;
    const double excess = std::isnan(diff) ? HUGE_VAL : diff / bound;
    if (worst.element < 0 || excess > worstExcess) {
      worstExcess = excess;
      worst.element = static_cast<int64_t>(i);
      worst.got = got.values[i];
      worst.expected = want.value[i];
      worst.bound = bound;
    }
  }
  if (worst.outside == 0) return;
  worst.iteration = iteration;
  worst.param = got.param;
  out.mismatches.push_back(std::move(worst));
}

}  // namespace

StepJudgement judgeOptimizerSteps(const model::RunModel& run) {
  StepJudgement out;
  const RunSetup setup = runSetupOf(run);
  if (!setup.known) {
    out.why = "the run's config text does not parse";
    return out;
  }
  const events::RunSettings& cfg = setup.settings;
  if (cfg.forwardOnly) {
    out.why = "forward-only run";
    return out;
  }
  if (isLowPrecision(cfg.dtype)) {
    out.why = std::string("a ") + events::toString(cfg.dtype) + " step is not judged";
    return out;
  }
  const auto after = gatherGradients(run, GradPhase::ParamAfterStep, true);
  const auto initial = gatherGradients(run, GradPhase::ParamInitial, true);
  const auto reduced = gatherGradients(run, GradPhase::Reduced, true);
  const auto afterBy = byKey(after), initialBy = byKey(initial), reducedBy = byKey(reduced);
  out.optimizer = describe(cfg.optimizer);
  const bool stateful =
      cfg.optimizer.kind == events::OptimizerKind::Adam || cfg.optimizer.momentum != 0;
  std::map<std::string, State> state;
  std::set<std::string> lost;  // parameters whose state depends on what the file lacks
  // param_after_step rows in (iteration, param) order: a step is judged where its parameters
  // before, its reduced gradient and its result are all in the file, and (stateful optimizers)
  // every earlier step of that parameter was.
  for (const auto& [key, recordedAfter] : afterBy) {
    const auto& [it, param] = key;
    const GatheredGradient* before = nullptr;
    if (it == 0) {
      auto b = initialBy.find({0, param});
      if (b != initialBy.end()) before = b->second;
    } else if (auto b = afterBy.find({it - 1, param}); b != afterBy.end()) {
      before = b->second;
    }
    auto g = reducedBy.find(key);
    const bool have = before && g != reducedBy.end() &&
                      g->second->values.size() == before->values.size() &&
                      recordedAfter->values.size() == before->values.size();
    if (!have || lost.count(param)) {
      // Without this step's inputs the state after it is unknown too.
      if (stateful) lost.insert(param);
      ++out.notJudged;
      continue;
    }
    State& s = state[param];
    const Stepped want = cfg.optimizer.kind == events::OptimizerKind::Adam
                             ? stepAdam(cfg.optimizer, s, before->values, g->second->values)
                             : stepSgd(cfg.optimizer, s, before->values, g->second->values);
    ++out.steps;
    compare(want, *recordedAfter, it, out);
  }
  out.judged = out.steps > 0;
  if (!out.judged)
    out.why = "no step with its parameters and reduced gradient recorded with values";
  return out;
}

}  // namespace stagescope::analysis
