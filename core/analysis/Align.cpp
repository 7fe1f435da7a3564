#include "core/analysis/Align.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <thread>
#include <tuple>

#include "core/analysis/Inputs.h"
#include "core/analysis/Pairing.h"
#include "core/analysis/Samples.h"
#include "core/analysis/Values.h"
#include "core/model/EdgeRanks.h"

namespace stagescope::analysis {

using events::Direction;
using events::Side;
using model::RunModel;

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

struct ModuleShape {
  int tp = 0, pp = 0, dp = 0, cp = 0;
  bool operator==(const ModuleShape&) const = default;
};

std::map<std::string, ModuleShape> modulesOf(const RunModel& run) {
  std::map<std::string, ModuleShape> m;
  for (const auto& x : run.info.modules) m[x.name] = {x.tp, x.pp, x.dp, x.cp};
  return m;
}

int dpSize(const std::map<std::string, ModuleShape>& m, const std::string& module) {
  auto it = m.find(module);
  return it == m.end() ? 1 : std::max(it->second.dp, 1);
}

using model::edgeModules;

// ---- transfers ----------------------------------------------------------------------------
// A message's logical identity across runs: edge, direction, iteration, global microbatch and
// the dp replica it reaches (a bridge) or leaves (P2P).  Ordered with the edge by its text.
struct TKey {
  events::Name edge;
  int direction = 0, iteration = -1, globalMb = -1, dp = -1;
  auto tie() const { return std::tie(edge, direction, iteration, globalMb, dp); }
  bool operator<(const TKey& o) const { return tie() < o.tie(); }
  bool operator==(const TKey& o) const { return tie() == o.tie(); }
};

struct TGroup {
  TKey key;
  int dstDp = -1;
  int64_t send = -1, recv = -1;     // representative sides (lowest sender tp)
  std::vector<uint64_t> checksums;  // every side, every TP copy (0 = not recorded); sorted, unique
  bool sidesDisagree = false;       // a receive recorded another checksum than its send
  bool aligned = true;
};

// An int's order as an unsigned one's (for packed keys).
uint64_t ordered(int v) {
  return static_cast<uint32_t>(v) ^ 0x80000000u;
}

// What one transfer pair contributes to its group (transferGroups): its key packed into
// integers in TKey's order, with the edge as its rank among the run's edges by text, and the
// pair's index last, so that a sort keeps a group's pairs in the run's order.
struct TMember {
  uint64_t edgeDirection, iterationMb,
      dpPair;  // edge rank << 32 | dir; it << 32 | gmb; dp << 32 | pair
  uint32_t pair() const { return static_cast<uint32_t>(dpPair); }
  bool sameGroup(const TMember& o) const {
    return edgeDirection == o.edgeDirection && iterationMb == o.iterationMb &&
           dpPair >> 32 == o.dpPair >> 32;
  }
  bool operator<(const TMember& o) const {
    return std::tie(edgeDirection, iterationMb, dpPair) <
           std::tie(o.edgeDirection, o.iterationMb, o.dpPair);
  }
};

// Where a message of an edge goes from and to: the coordinates transferGroups needs of its two
// ranks, found once per (edge, src, dst) rather than per message.
struct MessageEnds {
  int srcDp = 0, dstDp = 0, srcTp = 0, dpSize = 1;
  bool aligned = true;
};

// The groups of a run's messages, sorted by key: each pair's sides, every TP copy together.
// P2P edges of a module whose pp or dp differs between the runs name other layer boundaries or
// replicas; a bridge touching a module whose dp differs pairs other replicas.  Built as a
// sorted vector of packed keys, not a map: a run holds millions of messages.
std::vector<TGroup> transferGroups(const RunModel& run, const std::set<std::string>& unaligned,
                                   const std::set<std::string>& otherReplicas) {
  const auto modules = modulesOf(run);
  std::vector<model::TransferPair> scratch;
  const auto& pairs = pairsOf(run, scratch);
  const std::vector<uint32_t> edgeRank = model::edgeRanks(run.transfers);
  std::map<std::tuple<const void*, int, int>, MessageEnds> endsOf;
  auto endsFor = [&](const events::TransferRecord& t) -> const MessageEnds& {
    auto [it, added] = endsOf.try_emplace({t.edge.id(), t.srcRank, t.dstRank});
    if (!added) return it->second;
    const auto [srcModule, dstModule] = edgeModules(t);
    // A colocated rank holds several modules: the coordinates are those of the edge's ends.
    const auto* src = findRank(run, t.srcRank, srcModule);
    const auto* dst = findRank(run, t.dstRank, dstModule);
    MessageEnds& e = it->second;
    e.srcDp = src ? src->dp : 0;
    e.dstDp = dst ? dst->dp : 0;
    e.srcTp = src ? src->tp : 0;
    e.dpSize = dpSize(modules, srcModule);
    e.aligned = t.edgeKind == events::EdgeKind::P2P
                    ? !unaligned.count(srcModule)
                    : !otherReplicas.count(srcModule) && !otherReplicas.count(dstModule);
    return e;
  };
  std::vector<TMember> members;
  members.reserve(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    const int64_t idx = p.send >= 0 ? p.send : p.recv;
    if (idx < 0) continue;
    const auto& t = run.transfers[idx];
    const MessageEnds& e = endsFor(t);
    const int gmb = t.microbatch * e.dpSize + e.srcDp;
    const int dp = t.edgeKind == events::EdgeKind::P2P ? e.srcDp : e.dstDp;
    members.push_back(
        {uint64_t{edgeRank[static_cast<size_t>(idx)]} << 32 | static_cast<uint8_t>(t.direction),
         ordered(t.iteration) << 32 | ordered(gmb), ordered(dp) << 32 | i});
  }
  std::sort(members.begin(), members.end());
  std::vector<TGroup> out;
  for (size_t g = 0; g < members.size();) {
    TGroup group;
    int sendTp = INT_MAX;
    size_t end = g;
    for (; end < members.size() && members[end].sameGroup(members[g]); ++end) {
      const auto& p = pairs[members[end].pair()];
      const auto& t = run.transfers[p.send >= 0 ? p.send : p.recv];
      const MessageEnds& e = endsFor(t);
      if (end == g)
        group.key = {t.edge, static_cast<int>(t.direction), t.iteration,
                     t.microbatch * e.dpSize + e.srcDp,
                     t.edgeKind == events::EdgeKind::P2P ? e.srcDp : e.dstDp};
      group.dstDp = e.dstDp;
      group.aligned = e.aligned;
      if (e.srcTp < sendTp) {
        sendTp = e.srcTp;
        group.send = p.send;
        group.recv = p.recv;
      }
      if (p.send >= 0) group.checksums.push_back(run.transfers[p.send].checksum);
      if (p.recv >= 0) group.checksums.push_back(run.transfers[p.recv].checksum);
      if (!p.checksumMatches) group.sidesDisagree = true;
    }
    std::sort(group.checksums.begin(), group.checksums.end());
    group.checksums.erase(std::unique(group.checksums.begin(), group.checksums.end()),
                          group.checksums.end());
    out.push_back(std::move(group));
    g = end;
  }
  return out;
}

// ---- losses -------------------------------------------------------------------------------
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

// An item within its relative L2 bound, also judged element by element where `bound` >= 0
// (ToleranceRule::elementBound): Differ when one element is off.
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

bool decodeTransfer(const RunModel& run, int64_t idx, std::vector<double>* out) {
  if (idx < 0) return false;
  const auto& t = run.transfers[idx];
  return !t.payload.empty() && decodeValues(t.payload, t.dtype, out);
}

double transferNorm(const RunModel& run, int64_t idx) {
  const auto& t = run.transfers[idx];
  return t.hasStats ? t.stats.l2 : NAN;
}

// What alignment needs of one run, independent of the other run: its causal order, its
// message groups (transferGroups) and its reduced gradients gathered per parameter.  Holds
// references into the run: neither copied nor moved.
struct RunSide {
  RunSide(const RunModel& run, const std::set<std::string>& unaligned,
          const std::set<std::string>& otherReplicas)
      : order(run),
        groups(transferGroups(run, unaligned, otherReplicas)),
        gradients(gatherGradients(run, events::GradPhase::Reduced, true)),
        initial(gatherGradients(run, events::GradPhase::ParamInitial, true)),
        accumulated(gatherAccumulated(run, false)) {}
  RunSide(const RunSide&) = delete;
  RunSide& operator=(const RunSide&) = delete;

  CausalOrder order;
  std::vector<TGroup> groups;
  std::vector<GatheredGradient> gradients;
  std::vector<GatheredGradient> initial;      // phase ParamInitial (level full)
  std::vector<GatheredGradient> accumulated;  // per (iteration, param, dp, microbatch), no values
};

bool allChecksumsOf(const GatheredGradient& g) {
  return !g.shardChecksums.empty() && std::none_of(g.shardChecksums.begin(), g.shardChecksums.end(),
                                                   [](uint64_t v) { return v == 0; });
}

// Judges gathered tensors without values: equal shard checksums of one shard layout are
// identical; other bytes under the same run layout differ (a layout computes bitwise
// reproducibly); else their norms (fallback).
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

// Sorts the items by (causal key, kind, key), equal ones in their order: indices are sorted,
// then the items moved once along the permutation's cycles (an item is ~200 bytes with three
// strings; a merge sort of a million of them moved each ~20 times).
// Both runs' sides of a gradient item (reduced, initial or accumulated): the representative
// record (the first shard), its norm and checksum, and the causal key (run A's; run B's when
// only B has the item).
void setGradientSides(AlignedItem& it, const GatheredGradient* x, const GatheredGradient* y,
                      const RunModel& a, const RunModel& b, const CausalOrder& ca,
                      const CausalOrder& cb) {
  if (x) {
    it.a = x->records.empty() ? -1 : x->records.front();
    it.valueA = x->norm;
    it.checksumA = x->shardChecksums.empty() ? 0 : x->shardChecksums.front();
    if (it.a >= 0) it.causal = ca.ofGradient(a.gradients[it.a]);
  }
  if (y) {
    it.b = y->records.empty() ? -1 : y->records.front();
    it.valueB = y->norm;
    it.checksumB = y->shardChecksums.empty() ? 0 : y->shardChecksums.front();
    if (!x && it.b >= 0) it.causal = cb.ofGradient(b.gradients[it.b]);
  }
}

// What the presence of a gradient item's two sides decides alone: only in one run, or shards
// that do not cover the tensor (never equal).  False when both are whole and must be judged.
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
                       const SampleLayout& lb, const std::map<std::string, ModuleShape>& ma,
                       const std::map<std::string, ModuleShape>& mb, Alignment& out) {
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

// Inputs by global sample (level full on both sides, both layouts known).
void alignInputs(const RunModel& a, const RunModel& b, const SampleLayout& la,
                 const SampleLayout& lb, const CausalOrder& ca, const CausalOrder& cb,
                 Alignment& out) {
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
  std::set<SampleKey> keys;
  for (const auto& kv : xa) keys.insert(kv.first);
  for (const auto& kv : xb) keys.insert(kv.first);
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

}  // namespace

Alignment alignRuns(const RunModel& a, const RunModel& b, const AlignOptions& opts) {
  Alignment out;
  const ToleranceRule& rule = opts.tolerance;
  const auto ma = modulesOf(a), mb = modulesOf(b);
  out.sameLayout = ma == mb;
  // Checksums are evidence only between runs whose checksums one function computed (a format-1
  // file's FNV-1a against XXH3-64 says nothing): otherwise values, then norms, judge.
  const bool sameFunction = model::sameChecksumFunction(a, b);
  // Modules whose pipeline depth or replica count differs: their P2P edges name other layer
  // boundaries / replicas, their bridges other replica pairs.  With both layouts known, a
  // module whose replicas hold another number of samples per microbatch too: its messages
  // carry other samples under the same (microbatch, replica).
  std::set<std::string> unaligned;      // P2P edges of these modules are not aligned
  std::set<std::string> otherReplicas;  // bridges touching these modules are not aligned
  const SampleLayout la = sampleLayoutOf(a), lb = sampleLayoutOf(b);
  const bool layoutsKnown = la.known && lb.known;
  for (const auto& [name, x] : ma) {
    auto it = mb.find(name);
    if (it == mb.end()) continue;
    const bool otherSplit = layoutsKnown && la.perReplica(name) != lb.perReplica(name);
    if (x.pp != it->second.pp || x.dp != it->second.dp || otherSplit) unaligned.insert(name);
    if (x.dp != it->second.dp || otherSplit) otherReplicas.insert(name);
  }
  decideGlobalBatch(a, b, la, lb, ma, mb, out);
  // What alignment needs of each run alone (causal order, message groups, gathered
  // gradients) is independent of the other run: run B's is built on a second thread.
  std::optional<RunSide> sideB;
  std::exception_ptr sideBError;
  std::thread buildB([&] {
    try {
      sideB.emplace(b, unaligned, otherReplicas);
    } catch (...) {
      sideBError = std::current_exception();
    }
  });
  std::optional<RunSide> sideA;
  try {
    sideA.emplace(a, unaligned, otherReplicas);
  } catch (...) {
    buildB.join();
    throw;
  }
  buildB.join();
  if (sideBError) std::rethrow_exception(sideBError);
  const CausalOrder& ca = sideA->order;
  const CausalOrder& cb = sideB->order;

  // Whole-model gradient norm per iteration: the floor of relative differences.
  const auto& ga = sideA->gradients;
  const auto& gb = sideB->gradients;
  std::map<int, double> modelNorm;
  for (const auto* list : {&ga, &gb}) {
    std::map<int, double> sq;
    for (const auto& g : *list) {
      if (std::isfinite(g.norm)) sq[g.iteration] += g.norm * g.norm;
    }
    for (const auto& [it, v] : sq) modelNorm[it] = std::max(modelNorm[it], std::sqrt(v));
  }
  auto floorOf = [&](int iteration) {
    auto it = modelNorm.find(iteration);
    return rule.floorRel * (it == modelNorm.end() ? 0.0 : it->second);
  };

  // ---- transfers
  {
    const auto& ta = sideA->groups;
    const auto& tb = sideB->groups;
    // Every item at once (a vector that doubles holds both copies): the messages of the larger
    // run (every key of either when they differ grows it once), and at most one item per loss
    // and per gathered gradient of either run.
    out.items.reserve(std::max(ta.size(), tb.size()) + a.losses.size() + b.losses.size() +
                      ga.size() + gb.size() + sideA->initial.size() + sideB->initial.size() +
                      sideA->accumulated.size() + sideB->accumulated.size());
    std::vector<double> va, vb;
    // Both are sorted by key: walk them together (every key of either, in key order).
    for (size_t ia = 0, ib = 0; ia < ta.size() || ib < tb.size();) {
      const bool takeA = ia < ta.size() && (ib == tb.size() || !(tb[ib].key < ta[ia].key));
      const bool takeB = ib < tb.size() && (ia == ta.size() || !(ta[ia].key < tb[ib].key));
      const TGroup* x = takeA ? &ta[ia++] : nullptr;
      const TGroup* y = takeB ? &tb[ib++] : nullptr;
      const TGroup& any = x ? *x : *y;
      AlignedItem it;
      it.kind = ItemKind::Transfer;
      it.edge = any.key.edge;
      it.direction = static_cast<Direction>(any.key.direction);
      it.iteration = any.key.iteration;
      it.microbatch = any.key.globalMb;
      it.key = it.edge + " " + events::toString(it.direction) + " it" +
               std::to_string(it.iteration) + " gmb" + std::to_string(it.microbatch);
      if (it.edge.find("->") != std::string::npos && it.edge.find(':') == std::string::npos) {
        it.key += " to dp" + std::to_string(any.key.dp);
      }
      auto rep = [](const TGroup* g) { return g->send >= 0 ? g->send : g->recv; };
      if (x) {
        it.a = rep(x);
        it.checksumA = a.transfers[it.a].checksum;
        it.valueA = transferNorm(a, it.a);
        it.causal = ca.ofTransfer(it.a);
      }
      if (y) {
        it.b = rep(y);
        it.checksumB = b.transfers[it.b].checksum;
        it.valueB = transferNorm(b, it.b);
        if (!x) it.causal = cb.ofTransfer(it.b);
      }
      const double tol = rule.bound(ValueKind::Transfer, it.iteration);
      it.tolerance = tol;
      if (!any.aligned || (x && !x->aligned) || (y && !y->aligned)) {
        it.state = ItemState::NotAligned;
      } else if (!x || !y) {
        it.state = x ? ItemState::OnlyA : ItemState::OnlyB;
      } else if (x->sidesDisagree || y->sidesDisagree) {
        // A receive recorded other bytes than its send: that run's message is corrupt.
        it.sidesDisagreeIn = (x->sidesDisagree ? 1 : 0) | (y->sidesDisagree ? 2 : 0);
        it.state = ItemState::Differ;
        it.evidence = Evidence::Checksums;
        it.distance = INFINITY;
      } else if (decodeTransfer(a, it.a, &va) && decodeTransfer(b, it.b, &vb)) {
        judgeByValues(it, va, vb, 0.0, tol);
      } else if (!sameFunction && std::isfinite(it.valueA) && std::isfinite(it.valueB)) {
        judgeByNorms(it, it.valueA, it.valueB, 0.0, tol);
      } else if (sameFunction && it.checksumA != 0 && it.checksumB != 0) {
        it.evidence = Evidence::Checksums;
        if (out.sameLayout ? x->checksums == y->checksums : it.checksumA == it.checksumB) {
          it.state = ItemState::Identical;
        } else if (out.sameLayout) {
          it.state = ItemState::Differ;
          it.distance = INFINITY;
        } else {
          judgeByNorms(it, it.valueA, it.valueB, 0.0, tol);
        }
      } else {
        it.state = ItemState::Unjudged;
      }
      out.items.push_back(std::move(it));
    }
  }

  // ---- losses: a microbatch loss numbered gmb = mb x llm dp + dp is the mean over samples
  // [gmb x b, (gmb + 1) x b) (b: the llm's samples per replica), so it is aligned only where b
  // agrees; the iteration mean is of the global batch
  {
    std::string llmName;
    for (const auto& m : a.info.modules)
      if (m.isLlm()) llmName = m.name;
    const bool otherLossSamples = layoutsKnown && la.perReplica(llmName) != lb.perReplica(llmName);
    auto xa = lossIndex(a), xb = lossIndex(b);
    std::set<std::pair<int, int>> keys;
    for (const auto& kv : xa) keys.insert(kv.first);
    for (const auto& kv : xb) keys.insert(kv.first);
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
        it.causal = ca.ofLoss(a.losses[it.a]);
      }
      if (ib != xb.end()) {
        it.b = ib->second;
        it.valueB = b.losses[it.b].loss;
        if (it.a < 0) it.causal = cb.ofLoss(b.losses[it.b]);
      }
      it.tolerance = rule.bound(ValueKind::Loss, it.iteration);
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

  // ---- gradients
  {
    std::map<std::pair<int, std::string>, const GatheredGradient*> xa, xb;
    for (const auto& g : ga) xa[{g.iteration, g.param}] = &g;
    for (const auto& g : gb) xb[{g.iteration, g.param}] = &g;
    std::set<std::pair<int, std::string>> keys;
    for (const auto& kv : xa) keys.insert(kv.first);
    for (const auto& kv : xb) keys.insert(kv.first);
    for (const auto& k : keys) {
      AlignedItem it;
      it.kind = ItemKind::Gradient;
      it.iteration = k.first;
      it.param = k.second;
      it.key = k.second + " it" + std::to_string(k.first);
      auto ia = xa.find(k), ib = xb.find(k);
      const GatheredGradient* x = ia != xa.end() ? ia->second : nullptr;
      const GatheredGradient* y = ib != xb.end() ? ib->second : nullptr;
      setGradientSides(it, x, y, a, b, ca, cb);
      const double tol = rule.bound(ValueKind::Gradient, it.iteration);
      it.tolerance = tol;
      if (decidedByPresence(it, x, y)) {
        // only in one run, or not whole: said
      } else if (x->hasValues && y->hasValues) {
        judgeByValues(it, x->values, y->values, floorOf(it.iteration), tol);
        judgeElements(it, x->values, y->values, floorOf(it.iteration),
                      rule.elementBound(it.iteration == 0));
      } else {
        const bool allChecksums = sameFunction && !x->shardChecksums.empty() &&
                                  std::none_of(x->shardChecksums.begin(), x->shardChecksums.end(),
                                               [](uint64_t v) { return v == 0; }) &&
                                  std::none_of(y->shardChecksums.begin(), y->shardChecksums.end(),
                                               [](uint64_t v) { return v == 0; });
        const bool sameShards = allChecksums && x->layout == y->layout;
        if (sameShards && x->shardChecksums == y->shardChecksums) {
          it.evidence = Evidence::Checksums;
          it.state = ItemState::Identical;
        } else if (sameShards && out.sameLayout) {
          // One layout computes bitwise reproducibly: other bytes are another result.
          it.evidence = Evidence::Checksums;
          it.state = ItemState::Differ;
          it.distance = INFINITY;
        } else if (x->shards > 0 && y->shards > 0) {
          judgeByNorms(it, x->norm, y->norm, floorOf(it.iteration), tol);
        } else {
          it.state = ItemState::Unjudged;
        }
      }
      out.items.push_back(std::move(it));
    }
  }

  // ---- initial parameters (level full): the same draw on both sides
  {
    std::map<std::string, const GatheredGradient*> xa, xb;
    for (const auto& g : sideA->initial) xa.emplace(g.param, &g);
    for (const auto& g : sideB->initial) xb.emplace(g.param, &g);
    std::set<std::string> keys;
    for (const auto& kv : xa) keys.insert(kv.first);
    for (const auto& kv : xb) keys.insert(kv.first);
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
      setGradientSides(it, x, y, a, b, ca, cb);
      const double tol = rule.bound(ValueKind::Gradient, 0);
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
        judgeByChecksumsOrNorms(it, *x, *y, sameFunction, out.sameLayout, 0.0, tol);
        if (out.sameLayout && (it.state == ItemState::WithinTolerance ||
                               (it.state == ItemState::Differ && it.evidence == Evidence::Norms))) {
          it.state = ItemState::Differ;
          it.tolerance = 0;
        }
      }
      out.items.push_back(std::move(it));
    }
  }

  // ---- accumulated gradients: per replica and local microbatch, where both runs split the
  // global batch among the same replicas (the module's dp and the llm's dp agree)
  {
    std::set<std::string> sameReplicas;
    int llmDpA = -1, llmDpB = -2;
    for (const auto& m : a.info.modules)
      if (m.isLlm()) llmDpA = m.dp;
    for (const auto& m : b.info.modules)
      if (m.isLlm()) llmDpB = m.dp;
    // A partial sum after local microbatch j of replica r is (1/m) x the sum over its samples
    // of microbatches 0..j: the same samples and scale only under the same m and split.
    const bool sameSplit =
        !layoutsKnown || (la.microbatches == lb.microbatches && la.globalBatch == lb.globalBatch);
    for (const auto& [name, x] : ma) {
      auto it = mb.find(name);
      if (it != mb.end() && it->second.dp == x.dp && llmDpA == llmDpB && sameSplit &&
          !otherReplicas.count(name))
        sameReplicas.insert(name);
    }
    using AKey = std::tuple<int, std::string, int, int>;  // iteration, param, dp, microbatch
    std::map<AKey, const GatheredGradient*> xa, xb;
    for (const auto* side : {&sideA->accumulated, &sideB->accumulated}) {
      auto& into = side == &sideA->accumulated ? xa : xb;
      for (const auto& g : *side) {
        if (!sameReplicas.count(g.module)) {
          ++out.accumulatedNotAligned;
          continue;
        }
        into.emplace(AKey{g.iteration, g.param, g.dp, g.microbatch}, &g);
      }
    }
    std::set<AKey> keys;
    for (const auto& kv : xa) keys.insert(kv.first);
    for (const auto& kv : xb) keys.insert(kv.first);
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
      setGradientSides(it, x, y, a, b, ca, cb);
      const double tol = rule.bound(ValueKind::Gradient, it.iteration);
      it.tolerance = tol;
      if (!decidedByPresence(it, x, y)) {
        judgeByChecksumsOrNorms(it, *x, *y, sameFunction, out.sameLayout, floorOf(it.iteration),
                                tol);
      }
      out.items.push_back(std::move(it));
    }
  }

  alignInputs(a, b, la, lb, ca, cb, out);
  requireBitwiseOnOneLayout(rule, out);

  // ---- causal order, counts, first divergence
  sortItems(out.items);
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
  return out;
}

}  // namespace stagescope::analysis
