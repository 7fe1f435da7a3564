#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <span>
#include <tuple>

#include "core/analysis/AlignSteps.h"
#include "core/analysis/Inputs.h"

namespace stagescope::analysis::align {

using model::RunModel;

namespace {

// Each run's input samples by (module, iteration, global sample): the first TP copy of each
// (rows are sorted by rank).  The replica rule is check's (Inputs.h), not compare's.
using SampleKey = std::tuple<std::string, int, int64_t>;
std::map<SampleKey, InputSample> samplesByKey(const RunModel& run, const SampleLayout& l) {
  std::map<SampleKey, InputSample> out;
  for (const auto& s : inputSamplesOf(run, l).samples) {
    const auto& in = run.inputs[s.row];
    out.emplace(SampleKey{in.module.str(), in.iteration, s.sample}, s);
  }
  return out;
}

// One sample on both sides: tokens exactly, patches element-wise within
// kPatchElementTolerance of max(1, |B|) (the engine draws them; two machines' LibTorch builds
// may differ in the last ulps), distance = the largest such relative difference.
void judgeSample(AlignedItem& it, std::span<const uint8_t> x, std::span<const uint8_t> y,
                 const std::string& dtype) {
  it.evidence = Evidence::Values;
  it.tolerance = dtype == "float32" ? kPatchElementTolerance : 0;
  if (x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin())) {
    it.state = ItemState::Identical;
    return;
  }
  it.state = ItemState::Differ;
  it.distance = INFINITY;
  if (dtype != "float32" || x.size() != y.size() || x.empty()) return;
  double worst = 0;
  for (size_t i = 0; i + 4 <= x.size(); i += 4) {
    float u, v;
    std::memcpy(&u, x.data() + i, 4);
    std::memcpy(&v, y.data() + i, 4);
    const double d = std::fabs(static_cast<double>(u) - v) / std::max(1.0, std::fabs(double{v}));
    if (!(d <= worst)) {
      worst = d;
      it.worstElement = static_cast<int64_t>(i / 4);
    }
  }
  it.distance = worst;
  if (worst <= kPatchElementTolerance) it.state = ItemState::WithinTolerance;
}

}  // namespace

// Inputs by global sample (level full on both sides, both layouts known).
void alignInputs(const AlignContext& c, Alignment& out) {
  const RunModel& a = c.a;
  const RunModel& b = c.b;
  const SampleLayout& la = c.la;
  const SampleLayout& lb = c.lb;
  const CausalOrder& ca = c.sideA->order;
  const CausalOrder& cb = c.sideB->order;
  if (a.inputs.empty() && b.inputs.empty()) return;
  if (a.inputs.empty() || b.inputs.empty()) {
    out.inputsNotCompared =
        std::string("only ") + (a.inputs.empty() ? "B" : "A") + " recorded inputs (level full)";
    return;
  }
  if (!la.known || !lb.known) {
    out.inputsNotCompared = "no sample layout: " + (la.known ? lb.why : la.why);
    return;
  }
  const auto xa = samplesByKey(a, la), xb = samplesByKey(b, lb);
  const auto keys = keysOfEither(xa, xb);
  for (const auto& k : keys) {
    AlignedItem it;
    it.kind = ItemKind::Input;
    it.module = std::get<0>(k);
    it.iteration = std::get<1>(k);
    it.sample = std::get<2>(k);
    it.key = "input " + it.module + " it" + std::to_string(it.iteration) + " sample" +
             std::to_string(it.sample);
    auto ia = xa.find(k), ib = xb.find(k);
    const InputSample* x = ia != xa.end() ? &ia->second : nullptr;
    const InputSample* y = ib != xb.end() ? &ib->second : nullptr;
    const auto& any = x ? a.inputs[x->row] : b.inputs[y->row];
    it.microbatch = any.microbatch;
    it.dp = (x ? x : y)->dp;
    it.causal = x ? ca.ofInput(a.inputs[x->row]) : cb.ofInput(b.inputs[y->row]);
    if (x) it.a = static_cast<int64_t>(x->row);
    if (y) it.b = static_cast<int64_t>(y->row);
    if (!x || !y) {
      it.state = x ? ItemState::OnlyA : ItemState::OnlyB;
    } else {
      const auto bx = sampleBytes(a.inputs[x->row], x->index);
      const auto by = sampleBytes(b.inputs[y->row], y->index);
      if (bx.empty() || by.empty())
        it.state = ItemState::Unjudged;
      else
        judgeSample(it, bx, by, any.dtype.str());
    }
    out.items.push_back(std::move(it));
  }
}

// One layout computes bitwise reproducibly (docs/analysis.md "Tolerance rule"): where both
// runs have the same layout and compute in float32 under the documented rule (no --tol), a

}  // namespace stagescope::analysis::align
