#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "core/analysis/AlignSteps.h"

namespace stagescope::analysis::align {

// Reduced gradients by (iteration, parameter): values (float32 of iteration 0 also element by
// element), else checksums of one shard layout, else norms.
void alignReducedGradients(const AlignContext& c, Alignment& out) {
  std::map<std::pair<int, std::string>, const GatheredGradient*> xa, xb;
  for (const auto& g : c.sideA->gradients) xa[{g.iteration, g.param}] = &g;
  for (const auto& g : c.sideB->gradients) xb[{g.iteration, g.param}] = &g;
  const auto keys = keysOfEither(xa, xb);
  for (const auto& k : keys) {
    AlignedItem it;
    it.kind = ItemKind::Gradient;
    it.iteration = k.first;
    it.param = k.second;
    it.key = k.second + " it" + std::to_string(k.first);
    auto ia = xa.find(k), ib = xb.find(k);
    const GatheredGradient* x = ia != xa.end() ? ia->second : nullptr;
    const GatheredGradient* y = ib != xb.end() ? ib->second : nullptr;
    setGradientSides(it, x, y, c);
    const double tol = c.rule.bound(ValueKind::Gradient, it.iteration);
    it.tolerance = tol;
    if (decidedByPresence(it, x, y)) {
      // only in one run, or not whole: said
    } else if (x->hasValues && y->hasValues) {
      judgeByValues(it, x->values, y->values, c.floorOf(it.iteration), tol);
      judgeElements(it, x->values, y->values, c.floorOf(it.iteration),
                    c.rule.elementBound(it.iteration == 0));
    } else {
      judgeByChecksumsOrNorms(it, *x, *y, c.sameFunction, out.sameLayout, c.floorOf(it.iteration),
                              tol);
    }
    out.items.push_back(std::move(it));
  }
}

// Initial parameters (level full) by name: the same draw on both sides.
void alignInitialParameters(const AlignContext& c, Alignment& out) {
  std::map<std::string, const GatheredGradient*> xa, xb;
  for (const auto& g : c.sideA->initial) xa.emplace(g.param, &g);
  for (const auto& g : c.sideB->initial) xb.emplace(g.param, &g);
  const auto keys = keysOfEither(xa, xb);
  for (const auto& k : keys) {
    AlignedItem it;
    it.kind = ItemKind::Gradient;
    it.phase = events::GradPhase::ParamInitial;
    it.param = k;
    it.key = "initial " + k;
    auto ia = xa.find(k), ib = xb.find(k);
    const GatheredGradient* x = ia != xa.end() ? ia->second : nullptr;
    const GatheredGradient* y = ib != xb.end() ? ib->second : nullptr;
    it.iteration = (x ? x : y)->iteration;
    setGradientSides(it, x, y, c);
    const double tol = c.rule.bound(ValueKind::Gradient, 0);
    it.tolerance = tol;
    if (decidedByPresence(it, x, y)) {
      // only in one run, or not whole: said
    } else if (x->hasValues && y->hasValues) {
      judgeByValues(it, x->values, y->values, 0.0, tol);
      // One layout and seed draw the same bytes: nothing but bitwise equality passes.
      if (out.sameLayout && it.state != ItemState::Identical) {
        it.state = ItemState::Differ;
        it.tolerance = 0;
      }
    } else {
      judgeByChecksumsOrNorms(it, *x, *y, c.sameFunction, out.sameLayout, 0.0, tol);
      if (out.sameLayout && (it.state == ItemState::WithinTolerance ||
                             (it.state == ItemState::Differ && it.evidence == Evidence::Norms))) {
        it.state = ItemState::Differ;
        it.tolerance = 0;
      }
    }
    out.items.push_back(std::move(it));
  }
}

// Accumulated gradients per replica and local microbatch, where both runs split the
// global batch among the same replicas (the module's dp and the llm's dp agree)
void alignAccumulatedGradients(const AlignContext& c, Alignment& out) {
  std::set<std::string> sameReplicas;
  int llmDpA = -1, llmDpB = -2;
  for (const auto& m : c.a.info.modules)
    if (m.isLlm()) llmDpA = m.dp;
  for (const auto& m : c.b.info.modules)
    if (m.isLlm()) llmDpB = m.dp;
  // A partial sum after local microbatch j of replica r is (1/m) x the sum over its samples
  // of microbatches 0..j: the same samples and scale only under the same m and split.
  const bool sameSplit = !c.layoutsKnown || (c.la.microbatches == c.lb.microbatches &&
                                             c.la.globalBatch == c.lb.globalBatch);
  for (const auto& [name, x] : c.ma) {
    auto it = c.mb.find(name);
    if (it != c.mb.end() && it->second.dp == x.dp && llmDpA == llmDpB && sameSplit &&
        !c.grouping.otherReplicas.count(name))
      sameReplicas.insert(name);
  }
  using AKey = std::tuple<int, std::string, int, int>;  // iteration, param, dp, microbatch
  std::map<AKey, const GatheredGradient*> xa, xb;
  for (const auto* side : {&c.sideA->accumulated, &c.sideB->accumulated}) {
    auto& into = side == &c.sideA->accumulated ? xa : xb;
    for (const auto& g : *side) {
      if (!sameReplicas.count(g.module)) {
        ++out.accumulatedNotAligned;
        continue;
      }
      into.emplace(AKey{g.iteration, g.param, g.dp, g.microbatch}, &g);
    }
  }
  const auto keys = keysOfEither(xa, xb);
  for (const auto& k : keys) {
    AlignedItem it;
    it.kind = ItemKind::Gradient;
    it.phase = events::GradPhase::Accumulated;
    it.iteration = std::get<0>(k);
    it.param = std::get<1>(k);
    it.dp = std::get<2>(k);
    it.microbatch = std::get<3>(k);
    it.key = it.param + " it" + std::to_string(it.iteration) + " dp" + std::to_string(it.dp) +
             " mb" + std::to_string(it.microbatch) + " accumulated";
    auto ia = xa.find(k), ib = xb.find(k);
    const GatheredGradient* x = ia != xa.end() ? ia->second : nullptr;
    const GatheredGradient* y = ib != xb.end() ? ib->second : nullptr;
    setGradientSides(it, x, y, c);
    const double tol = c.rule.bound(ValueKind::Gradient, it.iteration);
    it.tolerance = tol;
    if (!decidedByPresence(it, x, y)) {
      judgeByChecksumsOrNorms(it, *x, *y, c.sameFunction, out.sameLayout, c.floorOf(it.iteration),
                              tol);
    }
    out.items.push_back(std::move(it));
  }
}

}  // namespace stagescope::analysis::align
