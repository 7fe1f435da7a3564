#include "core/analysis/AlignSteps.h"
#include "core/analysis/Tolerance.h"

namespace stagescope::analysis::align {

using model::RunModel;

namespace {

// The row of the module whose last stage computed a loss on `rank`: the llm's when the rank
// holds it (a colocated rank also holds encoders), else the rank's first.
const events::RankInfo* lossRow(const RunModel& run, int rank) {
  for (const auto& mi : run.info.modules)
    if (mi.isLlm())
      if (const auto* r = findRank(run, rank, mi.name)) return r;
  return findRank(run, rank);
}

std::map<std::pair<int, int>, int64_t> lossIndex(const RunModel& run) {
  const auto modules = modulesOf(run);
  std::map<std::pair<int, int>, int64_t> out;  // (iteration, global mb) -> first record
  for (size_t i = 0; i < run.losses.size(); ++i) {
    const auto& l = run.losses[i];
    if (l.rank < 0) continue;  // reference rows
    if (l.microbatch < 0) {
      // The iteration's mean over the global batch: every last-stage rank of every replica
      // holds the same all-reduced value (Replicas.h compares the copies); one item.
      out.emplace(std::make_pair(l.iteration, -1), static_cast<int64_t>(i));
      continue;
    }
    const auto* info = lossRow(run, l.rank);
    const int D = info ? dpSize(modules, info->module) : 1;
    out.emplace(std::make_pair(l.iteration, l.microbatch * D + l.dp), static_cast<int64_t>(i));
  }
  return out;
}

}  // namespace

// A microbatch loss numbered gmb = mb x llm dp + dp is the mean over samples
// [gmb x b, (gmb + 1) x b) (b: the llm's samples per replica), so it is aligned only where b
// agrees; the iteration mean is of the global batch
void alignLosses(const AlignContext& c, Alignment& out) {
  const RunModel& a = c.a;
  const RunModel& b = c.b;
  std::string llmName;
  for (const auto& m : a.info.modules)
    if (m.isLlm()) llmName = m.name;
  const bool otherLossSamples =
      c.layoutsKnown && c.la.perReplica(llmName) != c.lb.perReplica(llmName);
  auto xa = lossIndex(a), xb = lossIndex(b);
  const auto keys = keysOfEither(xa, xb);
  for (const auto& k : keys) {
    AlignedItem it;
    it.kind = ItemKind::Loss;
    it.iteration = k.first;
    it.microbatch = k.second;
    it.key = "loss it" + std::to_string(k.first) +
             (k.second < 0 ? std::string(" mean") : " gmb" + std::to_string(k.second));
    auto ia = xa.find(k), ib = xb.find(k);
    if (ia != xa.end()) {
      it.a = ia->second;
      it.valueA = a.losses[it.a].loss;
      it.causal = c.sideA->order.ofLoss(a.losses[it.a]);
    }
    if (ib != xb.end()) {
      it.b = ib->second;
      it.valueB = b.losses[it.b].loss;
      if (it.a < 0) it.causal = c.sideB->order.ofLoss(b.losses[it.b]);
    }
    it.tolerance = c.rule.bound(ValueKind::Loss, it.iteration);
    if (otherLossSamples && k.second >= 0) {
      it.state = ItemState::NotAligned;  // the same number, other samples
    } else if (it.a < 0 || it.b < 0) {
      it.state = it.a >= 0 ? ItemState::OnlyA : ItemState::OnlyB;
    } else {
      it.evidence = Evidence::Values;
      if (sameValue(it.valueA, it.valueB)) {
        it.state = ItemState::Identical;
      } else {
        it.distance = lossDistance(it.valueA, it.valueB);
        it.state = it.distance <= it.tolerance ? ItemState::WithinTolerance : ItemState::Differ;
      }
    }
    out.items.push_back(std::move(it));
  }
}

}  // namespace stagescope::analysis::align
