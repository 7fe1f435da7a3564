#include <algorithm>
#include <cmath>

#include "core/analysis/AlignSteps.h"

namespace stagescope::analysis::align {

namespace {

bool allChecksumsOf(const GatheredGradient& g) {
  return !g.shardChecksums.empty() && std::none_of(g.shardChecksums.begin(), g.shardChecksums.end(),
                                                   [](uint64_t v) { return v == 0; });
}

}  // namespace

bool sameValue(double x, double y) {
  return x == y || (std::isnan(x) && std::isnan(y));
}

void judgeByNorms(AlignedItem& it, double normA, double normB, double floor, double tol) {
  it.evidence = Evidence::Norms;
  it.tolerance = tol;
  if (sameValue(normA, normB)) {
    it.distance = 0;
  } else if (!std::isfinite(normA) || !std::isfinite(normB)) {
    it.distance = INFINITY;
  } else {
    const double den = std::max({std::fabs(normA), std::fabs(normB), floor});
    it.distance = den > 0 ? std::fabs(normA - normB) / den : 0;
  }
  it.state = it.distance <= tol ? ItemState::WithinTolerance : ItemState::Differ;
}

void judgeByValues(AlignedItem& it, const std::vector<double>& a, const std::vector<double>& b,
                   double floor, double tol) {
  it.evidence = Evidence::Values;
  it.tolerance = tol;
  const ValueDistance d = valueDistance(a, b, floor);
  it.distance = d.rel;
  it.worstElement = d.worst;
  it.state = d.bitwiseEqual ? ItemState::Identical
             : d.rel <= tol ? ItemState::WithinTolerance
                            : ItemState::Differ;
}

void judgeElements(AlignedItem& it, const std::vector<double>& a, const std::vector<double>& b,
                   double floor, double bound) {
  if (bound < 0 || it.state != ItemState::WithinTolerance) return;
  const ElementDistance e = elementDistance(a, b, floor);
  it.elementRatio = e.ratio;
  it.elementBound = bound;
  if (e.ratio > bound) {
    it.state = ItemState::Differ;
    it.worstElement = e.worst;
  }
}

void judgeByChecksumsOrNorms(AlignedItem& it, const GatheredGradient& x, const GatheredGradient& y,
                             bool sameFunction, bool sameLayout, double floor, double tol) {
  const bool sameShards =
      sameFunction && allChecksumsOf(x) && allChecksumsOf(y) && x.layout == y.layout;
  if (sameShards && x.shardChecksums == y.shardChecksums) {
    it.evidence = Evidence::Checksums;
    it.state = ItemState::Identical;
  } else if (sameShards && sameLayout) {
    it.evidence = Evidence::Checksums;
    it.state = ItemState::Differ;
    it.distance = INFINITY;
  } else if (x.shards > 0 && y.shards > 0) {
    judgeByNorms(it, x.norm, y.norm, floor, tol);
  } else {
    it.state = ItemState::Unjudged;
  }
}

void setGradientSides(AlignedItem& it, const GatheredGradient* x, const GatheredGradient* y,
                      const AlignContext& c) {
  const CausalOrder& ca = c.sideA->order;
  const CausalOrder& cb = c.sideB->order;
  if (x) {
    it.a = x->records.empty() ? -1 : x->records.front();
    it.valueA = x->norm;
    it.checksumA = x->shardChecksums.empty() ? 0 : x->shardChecksums.front();
    if (it.a >= 0) it.causal = ca.ofGradient(c.a.gradients[it.a]);
  }
  if (y) {
    it.b = y->records.empty() ? -1 : y->records.front();
    it.valueB = y->norm;
    it.checksumB = y->shardChecksums.empty() ? 0 : y->shardChecksums.front();
    if (!x && it.b >= 0) it.causal = cb.ofGradient(c.b.gradients[it.b]);
  }
}

bool decidedByPresence(AlignedItem& it, const GatheredGradient* x, const GatheredGradient* y) {
  if (!x || !y) {
    it.state = x ? ItemState::OnlyA : ItemState::OnlyB;
    return true;
  }
  if (!x->complete || !y->complete) {
    it.state = ItemState::Differ;  // shards do not cover the tensor: never equal
    it.distance = INFINITY;
    return true;
  }
  return false;
}

double AlignContext::floorOf(int iteration) const {
  auto it = modelNorm.find(iteration);
  return rule.floorRel * (it == modelNorm.end() ? 0.0 : it->second);
}

ModuleShapes modulesOf(const model::RunModel& run) {
  ModuleShapes m;
  for (const auto& x : run.info.modules) m[x.name] = {x.tp, x.pp, x.dp, x.cp};
  return m;
}

int dpSize(const ModuleShapes& m, const std::string& module) {
  auto it = m.find(module);
  return it == m.end() ? 1 : std::max(it->second.dp, 1);
}

}  // namespace stagescope::analysis::align
