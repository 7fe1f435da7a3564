#include "core/analysis/Replicas.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <tuple>

#include "core/analysis/Format.h"
#include "core/analysis/Values.h"

namespace stagescope::analysis {
namespace {

using events::GradientRecord;
using events::GradPhase;
using events::LossRecord;

// The phases whose records are copies across replicas, in the order a step produces them.
int phaseOrder(GradPhase p) {
  switch (p) {
    case GradPhase::ParamInitial:
      return 0;
    case GradPhase::Reduced:
      return 1;
    case GradPhase::ParamAfterStep:
      return 2;
    default:
      return -1;  // accumulated (per microbatch: not copies), reference (its own table)
  }
}

// The first element at which two payloads of `dtype` differ, as "element E: A vs B"; "" when
// the payloads cannot be decoded.
std::string firstDifferingElement(const GradientRecord& a, const GradientRecord& b) {
  std::vector<double> x, y;
  if (!decodeValues(a.payload, a.dtype.str(), &x) || !decodeValues(b.payload, b.dtype.str(), &y))
    return "";
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    const bool same = std::memcmp(&x[i], &y[i], sizeof(double)) == 0;
    if (!same) {
      std::ostringstream s;
      s.precision(9);
      s << "element " << i << ": " << x[i] << " vs " << y[i];
      return s.str();
    }
  }
  return "";
}

// Why copy `b` differs from copy `a` ("" when they are equal); `judged` is false when neither
// a checksum nor a payload could tell.
std::string tensorDifference(const GradientRecord& a, const GradientRecord& b, bool* judged) {
  *judged = true;
  if (a.dtype != b.dtype) return "dtype " + a.dtype.str() + " vs " + b.dtype.str();
  if (a.shape != b.shape)
    return "shape " + formatShape(a.shape.vec()) + " vs " + formatShape(b.shape.vec());
  const bool payloads = !a.payload.empty() && !b.payload.empty();
  const bool checksums = a.checksum != 0 && b.checksum != 0;
  if (payloads && a.payload.vec() != b.payload.vec()) {
    std::string why = "values differ";
    if (std::string e = firstDifferingElement(a, b); !e.empty()) why = e;
    if (checksums && a.checksum != b.checksum)
      why += " (checksum " + formatChecksum(a.checksum) + " vs " + formatChecksum(b.checksum) + ")";
    return why;
  }
  if (checksums && a.checksum != b.checksum)
    return "checksum " + formatChecksum(a.checksum) + " vs " + formatChecksum(b.checksum);
  *judged = payloads || checksums;
  return "";
}

void compareTensorCopies(const model::RunModel& run, ReplicaReport& out) {
  const auto& g = run.gradients;
  std::vector<size_t> idx;
  for (size_t i = 0; i < g.size(); ++i)
    if (phaseOrder(g[i].phase) >= 0) idx.push_back(i);
  // One group per (iteration, phase, parameter, shard); within it (dp, tp) ascending, so the
  // first copy is the one gatherGradients keeps.
  const auto key = [&](size_t i) {
    const GradientRecord& r = g[i];
    return std::make_tuple(r.iteration, phaseOrder(r.phase), r.module, r.param, r.partitionDim,
                           r.partitionOffset);
  };
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return std::tuple_cat(key(a), std::make_tuple(g[a].dp, g[a].tp, g[a].rank)) <
           std::tuple_cat(key(b), std::make_tuple(g[b].dp, g[b].tp, g[b].rank));
  });
  for (size_t i = 0; i < idx.size();) {
    size_t j = i + 1;
    while (j < idx.size() && key(idx[j]) == key(idx[i])) ++j;
    if (j - i > 1) ++out.groups;
    for (size_t k = i + 1; k < j; ++k) {
      bool judged = true;
      std::string why = tensorDifference(g[idx[i]], g[idx[k]], &judged);
      if (!judged) {
        ++out.unjudged;
        continue;
      }
      ++out.copies;
      if (!why.empty())
        out.mismatches.push_back(
            {false, static_cast<int64_t>(idx[i]), static_cast<int64_t>(idx[k]), std::move(why)});
    }
    i = j;
  }
}

bool sameLoss(double x, double y) {
  return std::memcmp(&x, &y, sizeof x) == 0 || (std::isnan(x) && std::isnan(y));
}

void compareLossCopies(const model::RunModel& run, ReplicaReport& out) {
  const auto& l = run.losses;
  std::vector<size_t> idx;
  for (size_t i = 0; i < l.size(); ++i)
    if (l[i].rank >= 0) idx.push_back(i);
  const auto key = [&](size_t i) {
    return std::make_tuple(l[i].iteration, l[i].microbatch, l[i].dp);
  };
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return std::make_tuple(key(a), l[a].rank) < std::make_tuple(key(b), l[b].rank);
  });
  for (size_t i = 0; i < idx.size();) {
    size_t j = i + 1;
    while (j < idx.size() && key(idx[j]) == key(idx[i])) ++j;
    if (j - i > 1) ++out.groups;
    for (size_t k = i + 1; k < j; ++k) {
      ++out.copies;
      const double a = l[idx[i]].loss, b = l[idx[k]].loss;
      if (sameLoss(a, b)) continue;
      std::ostringstream s;
      s.precision(9);
      s << a << " vs " << b;
      out.mismatches.push_back(
          {true, static_cast<int64_t>(idx[i]), static_cast<int64_t>(idx[k]), s.str()});
    }
    i = j;
  }
}

std::string describeCopy(const GradientRecord& g) {
  return "rank " + std::to_string(g.rank) + " (" + g.module.str() + " dp" + std::to_string(g.dp) +
         " tp" + std::to_string(g.tp) + " pp" + std::to_string(g.pp) + ")";
}

}  // namespace

std::string describe(const model::RunModel& run, const ReplicaMismatch& m) {
  if (m.loss) {
    const LossRecord& a = run.losses[static_cast<size_t>(m.first)];
    const LossRecord& b = run.losses[static_cast<size_t>(m.other)];
    return "loss of iteration " + std::to_string(b.iteration) +
           (b.microbatch < 0 ? std::string(" (iteration mean)")
                             : " microbatch " + std::to_string(b.microbatch)) +
           " dp" + std::to_string(b.dp) + ": rank " + std::to_string(a.rank) + " and rank " +
           std::to_string(b.rank) + " (tensor-parallel copies of one loss) recorded " + m.why;
  }
  const GradientRecord& a = run.gradients[static_cast<size_t>(m.first)];
  const GradientRecord& b = run.gradients[static_cast<size_t>(m.other)];
  return std::string(events::toString(b.phase)) + " " + b.param.str() + " iteration " +
         std::to_string(b.iteration) + ": the copy on " + describeCopy(b) +
         " differs from the copy on " + describeCopy(a) +
         " (replicas must hold equal values; reference_gradient and compare judge the latter): " +
         m.why;
}

ReplicaReport compareReplicas(const model::RunModel& run) {
  ReplicaReport out;
  compareTensorCopies(run, out);
  compareLossCopies(run, out);
  return out;
}

}  // namespace stagescope::analysis
