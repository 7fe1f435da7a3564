#include "core/analysis/Tolerance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace stagescope::analysis {

namespace {
// bfloat16/float16: one bound for every iteration and kind (Tolerance.h).
constexpr double kLowPrecisionBound = 0.15;
}  // namespace

double ToleranceRule::scaledGradientBound(int iteration, double spread) const {
  const double base = bound(ValueKind::Gradient, iteration);
  if (override >= 0 || !(spread >= 0) || !std::isfinite(spread)) return base;
  return std::max(lowPrecision ? kDtypeDeviationBase : base, deviationFactor() * spread);
}

double ToleranceRule::scaleBound(double spread) const {
  if (override >= 0 || !lowPrecision || !(spread >= 0) || !std::isfinite(spread)) return -1;
  return std::max(kScaleBase, kScaleFactor * spread);
}

double ToleranceRule::bound(ValueKind kind, int iteration) const {
  if (override >= 0) return override;
  if (lowPrecision) return kLowPrecisionBound;
  const bool first = iteration <= 0;
  return kind == ValueKind::Loss ? (first ? lossFirst : lossLater)
                                 : (first ? gradientFirst : gradientLater);
}

std::string ToleranceRule::describe() const {
  char buf[320];
  if (override >= 0) {
    std::snprintf(buf, sizeof buf, "relative L2 <= %.3g for every value (--tol)", override);
  } else {
    std::snprintf(buf, sizeof buf,
                  "relative L2 (floor %.3g x model gradient norm): gradients/messages %.3g in "
                  "iteration 0, %.3g after; losses %.3g in iteration 0, %.3g after%s",
                  floorRel, bound(ValueKind::Gradient, 0), bound(ValueKind::Gradient, 1),
                  bound(ValueKind::Loss, 0), bound(ValueKind::Loss, 1), "");
    if (lowPrecision) {
      std::snprintf(buf, sizeof buf,
                    "relative L2 (floor %.3g x model gradient norm) <= %.3g for every value "
                    "(bfloat16/float16)",
                    floorRel, kLowPrecisionBound);
    }
  }
  return buf;
}

bool isLowPrecision(const std::string& dtype) {
  return dtype == "bfloat16" || dtype == "float16" || dtype == "half";
}

ToleranceRule toleranceFor(const std::string& dtype, double override) {
  ToleranceRule r;
  r.lowPrecision = isLowPrecision(dtype);
  r.override = override;
  return r;
}

ValueDistance valueDistance(const std::vector<double>& a, const std::vector<double>& b,
                            double floor) {
  ValueDistance d;
  if (a.size() != b.size()) {
    d.sizesMatch = false;
    d.rel = INFINITY;
    return d;
  }
  d.bitwiseEqual = true;
  double d2 = 0, na = 0, nb = 0, worstAbs = -1;
  bool nonFiniteMismatch = false;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    const bool fx = std::isfinite(x), fy = std::isfinite(y);
    d.nonFiniteA += !fx;
    d.nonFiniteB += !fy;
    if (!(x == y || (std::isnan(x) && std::isnan(y)))) d.bitwiseEqual = false;
    if (!fx || !fy) {
      const bool same = (std::isnan(x) && std::isnan(y)) || x == y;
      if (!same && !nonFiniteMismatch) {
        nonFiniteMismatch = true;
        d.worst = static_cast<int64_t>(i);
      }
      continue;
    }
    const double e = x - y;
    d2 += e * e;
    na += x * x;
    nb += y * y;
    if (std::fabs(e) > worstAbs && !nonFiniteMismatch) {
      worstAbs = std::fabs(e);
      d.worst = static_cast<int64_t>(i);
    }
    d.maxAbs = std::max(d.maxAbs, std::fabs(e));
  }
  if (d.bitwiseEqual) {
    d.rel = 0;
    d.worst = -1;
    return d;
  }
  if (nonFiniteMismatch) {
    d.rel = INFINITY;
    return d;
  }
  const double den = std::max({std::sqrt(na), std::sqrt(nb), floor});
  d.rel = den > 0 ? std::sqrt(d2) / den : (d2 > 0 ? INFINITY : 0);
  return d;
}

namespace {
double rmsOf(const std::vector<double>& v) {
  double sq = 0;
  size_t n = 0;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    sq += x * x;
    ++n;
  }
  return n ? std::sqrt(sq / static_cast<double>(n)) : 0;
}
}  // namespace

ElementDistance elementDistance(const std::vector<double>& a, const std::vector<double>& b,
                                double floor) {
  ElementDistance d;
  if (a.size() != b.size()) return d;
  const double tensorScale = std::max({rmsOf(a), rmsOf(b), floor});
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i]) || a[i] == b[i]) continue;
    const double scale = std::max({std::fabs(a[i]), std::fabs(b[i]), tensorScale});
    const double r = scale > 0 ? std::fabs(a[i] - b[i]) / scale : INFINITY;
    if (r > d.ratio) {
      d.ratio = r;
      d.worst = static_cast<int64_t>(i);
      d.scale = scale;
    }
  }
  return d;
}

double scaleDeviation(const std::vector<double>& a, const std::vector<double>& ref, double floor) {
  if (a.size() != ref.size()) return 0;
  double dot = 0, rr = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(ref[i])) return 0;
    dot += (a[i] - ref[i]) * ref[i];
    rr += ref[i] * ref[i];
  }
  const double den = std::max(rr, floor * floor);
  return den > 0 ? dot / den : 0;
}

double lossDistance(double a, double b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return 0;
  if (!std::isfinite(a) || !std::isfinite(b)) return INFINITY;
  return std::fabs(a - b) / std::max({1.0, std::fabs(a), std::fabs(b)});
}

std::string computeDtypeOf(const model::RunModel& run) {
  for (const auto& g : run.gradients)
    if (g.phase == events::GradPhase::Reduced && !g.dtype.empty()) return g.dtype;
  for (const auto& t : run.transfers)
    if (!t.dtype.empty()) return t.dtype;
  return "";
}

}  // namespace stagescope::analysis
