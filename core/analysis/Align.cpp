#include "core/analysis/Align.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "core/analysis/AlignSteps.h"
#include "core/analysis/RunSetup.h"
#include "core/analysis/Samples.h"

namespace stagescope::analysis {

using model::RunModel;
using namespace align;

const char* toString(ItemKind k) {
  switch (k) {
    case ItemKind::Transfer:
      return "transfer";
    case ItemKind::Loss:
      return "loss";
    case ItemKind::Gradient:
      return "gradient";
    case ItemKind::Input:
      return "input";
  }
  return "?";
}

const char* toString(ItemState s) {
  switch (s) {
    case ItemState::Identical:
      return "identical";
    case ItemState::WithinTolerance:
      return "within tolerance";
    case ItemState::Differ:
      return "differ";
    case ItemState::OnlyA:
      return "only in A";
    case ItemState::OnlyB:
      return "only in B";
    case ItemState::NotAligned:
      return "not aligned";
    case ItemState::Unjudged:
      return "not judged";
  }
  return "?";
}

const char* toString(Evidence e) {
  switch (e) {
    case Evidence::Values:
      return "values";
    case Evidence::Checksums:
      return "checksums";
    case Evidence::Norms:
      return "norms (fallback)";
    case Evidence::None:
      return "none";
  }
  return "?";
}

namespace {

// Sorts the items by (causal key, kind, key), equal ones in their order: indices are sorted,
// then the items moved once along the permutation's cycles (an item is ~200 bytes with three
// strings; a merge sort of a million of them moved each ~20 times).
void sortItems(std::vector<AlignedItem>& items) {
  std::vector<uint32_t> order(items.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&items](uint32_t x, uint32_t y) {
    const AlignedItem &a = items[x], &b = items[y];
    if (a.causal < b.causal) return true;
    if (b.causal < a.causal) return false;
    return std::tie(a.kind, a.key, x) < std::tie(b.kind, b.key, y);
  });
  for (size_t i = 0; i < order.size(); ++i) {  // items[k] becomes the old items[order[k]]
    if (order[i] == i) continue;
    AlignedItem held = std::move(items[i]);
    size_t j = i;
    while (order[j] != i) {
      const size_t k = order[j];
      items[j] = std::move(items[k]);
      order[j] = static_cast<uint32_t>(j);
      j = k;
    }
    items[j] = std::move(held);
    order[j] = static_cast<uint32_t>(j);
  }
}

// Whether the runs train on the same samples (Samples.h): decided from the samples where both
// configs are known, else from microbatches x the llm's dp (a captured job).
void decideGlobalBatch(const RunModel& a, const RunModel& b, const SampleLayout& la,
                       const SampleLayout& lb, const ModuleShapes& ma, const ModuleShapes& mb,
                       Alignment& out) {
  auto differ = [&](const std::string& what) {
    out.sameGlobalBatch = false;
    out.globalBatchNote += (out.globalBatchNote.empty() ? "" : "; ") + what;
  };
  if (la.known && lb.known) {
    out.globalBatchEvidence = "samples";
    const GlobalBatchIdentity g = globalBatchIdentity(la, lb);
    if (!g.same) differ(g.note);
  } else {
    out.globalBatchEvidence =
        "microbatches x llm dp (a layout is unknown: " + (la.known ? lb.why : la.why) + ")";
    for (const auto& [name, x] : ma) {
      auto it = mb.find(name);
      if (it == mb.end()) continue;
      const bool llm = std::any_of(a.info.modules.begin(), a.info.modules.end(),
                                   [&](const auto& m) { return m.name == name && m.isLlm(); });
      const int64_t gA = static_cast<int64_t>(x.dp) * a.info.microbatches;
      const int64_t gB = static_cast<int64_t>(it->second.dp) * b.info.microbatches;
      if (llm && gA != gB)
        differ(name + ": dp x microbatches " + std::to_string(gA) + " vs " + std::to_string(gB));
    }
  }
  if (ma.size() != mb.size() ||
      !std::equal(ma.begin(), ma.end(), mb.begin(),
                  [](const auto& x, const auto& y) { return x.first == y.first; }))
    differ("the runs have different modules");
}

// difference of values of any size is another result, never "within tolerance".  Checksum
// evidence already says so (judgeByChecksumsOrNorms); this makes values say the same.
void requireBitwiseOnOneLayout(const ToleranceRule& rule, Alignment& out) {
  if (!out.sameLayout || rule.override >= 0 || rule.lowPrecision) return;
  for (auto& it : out.items) {
    // Only values show a difference; equal-enough norms (a fallback) show none.
    if (it.state != ItemState::WithinTolerance || it.evidence != Evidence::Values) continue;
    it.state = ItemState::Differ;
    it.tolerance = 0;
  }
}

// Counts per state, kind and evidence, and the first divergence: items must be sorted.
void countItems(Alignment& out) {
  for (size_t i = 0; i < out.items.size(); ++i) {
    const auto& it = out.items[i];
    const auto kind = static_cast<size_t>(it.kind);
    switch (it.state) {
      case ItemState::Identical:
        ++out.identical;
        break;
      case ItemState::WithinTolerance:
        ++out.withinTolerance;
        break;
      case ItemState::Differ:
        ++out.differ;
        if (out.firstDivergence < 0) out.firstDivergence = static_cast<int64_t>(i);
        break;
      case ItemState::OnlyA:
        ++out.onlyA;
        break;
      case ItemState::OnlyB:
        ++out.onlyB;
        break;
      case ItemState::NotAligned:
        ++out.notAligned;
        ++out.notAlignedByKind[kind];
        break;
      case ItemState::Unjudged:
        ++out.unjudged;
        break;
    }
    const bool compared = it.state == ItemState::Identical ||
                          it.state == ItemState::WithinTolerance || it.state == ItemState::Differ;
    if (compared) {
      if (it.kind == ItemKind::Loss && it.microbatch < 0) ++out.meanLossesCompared;
      if (it.kind == ItemKind::Gradient && it.phase == events::GradPhase::ParamInitial) {
        ++out.initialCompared;
        if (it.state == ItemState::Identical) ++out.initialBitwise;
      }
      if (it.kind == ItemKind::Gradient && it.phase == events::GradPhase::Accumulated)
        ++out.accumulatedCompared;
      ++out.compared[kind];
      ++out.byEvidence[static_cast<size_t>(it.evidence)];
      if (!std::isnan(it.distance))
        out.maxDistance[kind] = std::max(out.maxDistance[kind], it.distance);
    }
  }
}

// Modules whose pipeline depth or replica count differs: their P2P edges name other layer
// boundaries / replicas, their bridges other replica pairs.  With both layouts known, a module
// whose replicas hold another number of samples per microbatch too: its messages carry other
// samples under the same (microbatch, replica).
void findUnalignedModules(AlignContext& c) {
  for (const auto& [name, x] : c.ma) {
    auto it = c.mb.find(name);
    if (it == c.mb.end()) continue;
    const bool otherSplit = c.layoutsKnown && c.la.perReplica(name) != c.lb.perReplica(name);
    if (x.pp != it->second.pp || x.dp != it->second.dp || otherSplit)
      c.grouping.unaligned.insert(name);
    if (x.dp != it->second.dp || otherSplit) c.grouping.otherReplicas.insert(name);
  }
}

// Whole-model gradient norm per iteration, the larger of the two runs': the floor of relative
// gradient differences.
std::map<int, double> modelNorms(const RunSide& x, const RunSide& y) {
  std::map<int, double> out;
  for (const auto* list : {&x.gradients, &y.gradients}) {
    std::map<int, double> sq;
    for (const auto& g : *list) {
      if (std::isfinite(g.norm)) sq[g.iteration] += g.norm * g.norm;
    }
    for (const auto& [it, v] : sq) out[it] = std::max(out[it], std::sqrt(v));
  }
  return out;
}

// A gradient message's scale in `run` (AlignContext::gradientScaleA): 1 when its sample
// layout is unknown.
double gradientMessageScale(const RunModel& run, const SampleLayout& layout) {
  const RunSetup setup = runSetupOf(run);
  const auto* llm = setup.llm();
  if (!layout.known || !llm || layout.microbatches <= 0) return 1;
  const int perReplica = layout.perReplica(llm->name);
  if (perReplica <= 0) return 1;
  return setup.settings.lossScale / (static_cast<double>(layout.microbatches) * perReplica);
}

}  // namespace

Alignment alignRuns(const RunModel& a, const RunModel& b, const AlignOptions& opts) {
  Alignment out;
  AlignContext c(a, b, opts.tolerance);
  c.ma = modulesOf(a);
  c.mb = modulesOf(b);
  out.sameLayout = c.ma == c.mb;
  // Checksums are evidence only between runs whose checksums one function computed (a format-1
  // file's FNV-1a against XXH3-64 says nothing): otherwise values, then norms, judge.
  c.sameFunction = model::sameChecksumFunction(a, b);
  c.la = sampleLayoutOf(a);
  c.lb = sampleLayoutOf(b);
  c.layoutsKnown = c.la.known && c.lb.known;
  findUnalignedModules(c);
  c.gradientScaleA = gradientMessageScale(a, c.la);
  c.gradientScaleB = gradientMessageScale(b, c.lb);
  decideGlobalBatch(a, b, c.la, c.lb, c.ma, c.mb, out);
  // What alignment needs of each run alone (causal order, message groups, gathered
  // gradients) is independent of the other run: run B's is built on a second thread.
  std::optional<RunSide> sideB;
  std::exception_ptr sideBError;
  std::thread buildB([&] {
    try {
      sideB.emplace(b, c.grouping, c.lb);
    } catch (...) {
      sideBError = std::current_exception();
    }
  });
  std::optional<RunSide> sideA;
  try {
    sideA.emplace(a, c.grouping, c.la);
  } catch (...) {
    buildB.join();
    throw;
  }
  buildB.join();
  if (sideBError) std::rethrow_exception(sideBError);
  c.sideA = &*sideA;
  c.sideB = &*sideB;
  c.modelNorm = modelNorms(*sideA, *sideB);

  // Every item at once (a vector that doubles holds both copies): the messages of the larger
  // run (every key of either when they differ grows it once), and at most one item per loss
  // and per gathered gradient of either run.
  out.items.reserve(std::max(sideA->groups.size(), sideB->groups.size()) + a.losses.size() +
                    b.losses.size() + sideA->gradients.size() + sideB->gradients.size() +
                    sideA->initial.size() + sideB->initial.size() + sideA->accumulated.size() +
                    sideB->accumulated.size());
  alignTransfers(c, out);
  alignLosses(c, out);
  alignReducedGradients(c, out);
  alignInitialParameters(c, out);
  alignAccumulatedGradients(c, out);
  alignInputs(c, out);
  requireBitwiseOnOneLayout(opts.tolerance, out);
  sortItems(out.items);  // causal order: the first Differ is the causally first divergence
  countItems(out);
  return out;
}

}  // namespace stagescope::analysis
