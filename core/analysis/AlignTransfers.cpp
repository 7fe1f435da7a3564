#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "core/analysis/AlignSteps.h"
#include "core/analysis/Pairing.h"
#include "core/analysis/RunSetup.h"
#include "core/model/EdgeRanks.h"

namespace stagescope::analysis::align {

using events::Direction;
using model::edgeModules;
using model::RunModel;

namespace {

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
  // For a message not aligned by key: its modules (sender's, receiver's), and for a P2P
  // message the layer the module is cut before (-1 unknown).
  std::string srcModule, dstModule;
  int boundaryLayer = -1;
};

// The layer a P2P message between stages `srcPp` and `dstPp` of a module crosses before: the
// later stage's first layer (-1 when the module's split is unknown).
int boundaryOf(const std::map<std::string, std::vector<int>>& stages, const std::string& module,
               int srcPp, int dstPp) {
  auto it = stages.find(module);
  const int later = std::max(srcPp, dstPp);
  if (it == stages.end() || later <= 0 || later >= static_cast<int>(it->second.size())) return -1;
  return it->second[static_cast<size_t>(later)];
}

// The global samples a message not aligned by key carries (TGroup::firstSample): its
// sender's replica's samples of the microbatch, for a bridge only those its receiver's replica
// holds too.
void placeBySamples(TGroup& g, const MessageEnds& e, const SampleLayout& layout, int microbatch,
                    bool p2p) {
  const int64_t src = layout.firstSample(e.srcModule, e.srcDp, microbatch);
  const int64_t srcEnd = src + layout.perReplica(e.srcModule);
  if (src < 0 || srcEnd <= src) return;
  int64_t lo = src, hi = srcEnd;
  if (!p2p) {
    const int64_t dst = layout.firstSample(e.dstModule, e.dstDp, microbatch);
    if (dst < 0) return;
    lo = std::max(lo, dst);
    hi = std::min(hi, dst + layout.perReplica(e.dstModule));
    if (hi <= lo) return;
  } else if (e.boundaryLayer < 0) {
    return;
  }
  g.firstSample = lo;
  g.samples = static_cast<int32_t>(hi - lo);
  g.boundaryLayer = e.boundaryLayer;
}

}  // namespace

// The groups of a run's messages, sorted by key: each pair's sides, every TP copy together.
// P2P edges of a module whose pp or dp differs between the runs name other layer boundaries or
// replicas; a bridge touching a module whose dp differs pairs other replicas.  Built as a
// sorted vector of packed keys, not a map: a run holds millions of messages.
std::vector<TGroup> transferGroups(const RunModel& run, const GroupingRules& rules,
                                   const SampleLayout& layout) {
  const auto modules = modulesOf(run);
  const auto stages = stageFirstLayersOf(run);
  std::vector<model::TransferPair> scratch;
  const auto& pairs = pairsOf(run, scratch);
  const std::vector<uint32_t> edgeRank = model::edgeRanks(run.transfers);
  std::map<std::tuple<const void*, int, int>, MessageEnds> endsOf;
  auto endsFor = [&](const events::TransferRecord& t) -> const MessageEnds& {
    auto [it, added] = endsOf.try_emplace({t.edge.id(), t.srcRank, t.dstRank});
    if (!added) return it->second;
    // The message's sender and receiver modules: a bridge's gradient goes from the edge's
    // destination module back to its source.  A colocated rank holds several modules: the
    // coordinates are those of the message's ends.
    auto [srcModule, dstModule] = edgeModules(t);
    if (t.direction == Direction::Gradient) std::swap(srcModule, dstModule);
    const auto* src = findRank(run, t.srcRank, srcModule);
    const auto* dst = findRank(run, t.dstRank, dstModule);
    MessageEnds& e = it->second;
    e.srcDp = src ? src->dp : 0;
    e.dstDp = dst ? dst->dp : 0;
    e.srcTp = src ? src->tp : 0;
    e.dpSize = dpSize(modules, srcModule);
    const bool p2p = t.edgeKind == events::EdgeKind::P2P;  // one module: the order is moot
    e.aligned =
        p2p ? !rules.unaligned.count(srcModule)
            : !rules.otherReplicas.count(srcModule) && !rules.otherReplicas.count(dstModule);
    if (!e.aligned) {
      e.srcModule = srcModule;
      e.dstModule = dstModule;
      if (p2p && src && dst) e.boundaryLayer = boundaryOf(stages, srcModule, src->pp, dst->pp);
    }
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
    if (!group.aligned && layout.known) {
      const auto& p = pairs[members[g].pair()];
      const auto& t = run.transfers[p.send >= 0 ? p.send : p.recv];
      placeBySamples(group, endsFor(t), layout, t.microbatch, t.edgeKind == events::EdgeKind::P2P);
    }
    std::sort(group.checksums.begin(), group.checksums.end());
    group.checksums.erase(std::unique(group.checksums.begin(), group.checksums.end()),
                          group.checksums.end());
    out.push_back(std::move(group));
    g = end;
  }
  return out;
}

namespace {

bool decodeTransfer(const RunModel& run, int64_t idx, std::vector<double>* out) {
  if (idx < 0) return false;
  const auto& t = run.transfers[idx];
  return !t.payload.empty() && decodeValues(t.payload, t.dtype, out);
}

double transferNorm(const RunModel& run, int64_t idx) {
  const auto& t = run.transfers[idx];
  return t.hasStats ? t.stats.l2 : NAN;
}

// One message's item: its identity from either side, both sides' representative records, and
// its judgement (values at level full, else checksums, else norms).
AlignedItem transferItem(const AlignContext& c, const TGroup* x, const TGroup* y, bool sameLayout,
                         std::vector<double>& va, std::vector<double>& vb) {
  const RunModel& a = c.a;
  const RunModel& b = c.b;
  const TGroup& any = x ? *x : *y;
  AlignedItem it;
  it.kind = ItemKind::Transfer;
  it.edge = any.key.edge;
  it.direction = static_cast<Direction>(any.key.direction);
  it.iteration = any.key.iteration;
  it.microbatch = any.key.globalMb;
  it.key = it.edge + " " + events::toString(it.direction) + " it" + std::to_string(it.iteration) +
           " gmb" + std::to_string(it.microbatch);
  if (it.edge.find("->") != std::string::npos && it.edge.find(':') == std::string::npos) {
    it.key += " to dp" + std::to_string(any.key.dp);
  }
  auto rep = [](const TGroup* g) { return g->send >= 0 ? g->send : g->recv; };
  if (x) {
    it.a = rep(x);
    it.checksumA = a.transfers[it.a].checksum;
    it.valueA = transferNorm(a, it.a);
    it.causal = c.sideA->order.ofTransfer(it.a);
  }
  if (y) {
    it.b = rep(y);
    it.checksumB = b.transfers[it.b].checksum;
    it.valueB = transferNorm(b, it.b);
    if (!x) it.causal = c.sideB->order.ofTransfer(it.b);
  }
  const double tol = c.rule.bound(ValueKind::Transfer, it.iteration);
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
  } else if (!c.sameFunction && std::isfinite(it.valueA) && std::isfinite(it.valueB)) {
    judgeByNorms(it, it.valueA, it.valueB, 0.0, tol);
  } else if (c.sameFunction && it.checksumA != 0 && it.checksumB != 0) {
    it.evidence = Evidence::Checksums;
    if (sameLayout ? x->checksums == y->checksums : it.checksumA == it.checksumB) {
      it.state = ItemState::Identical;
    } else if (sameLayout) {
      it.state = ItemState::Differ;
      it.distance = INFINITY;
    } else {
      judgeByNorms(it, it.valueA, it.valueB, 0.0, tol);
    }
  } else {
    it.state = ItemState::Unjudged;
  }
  return it;
}

// ---- messages of two layouts, by the samples they carry ---------------------------------
// Where a module's pp, dp or samples per replica differ, its messages' keys name other layer
// boundaries and replicas: they are aligned instead by (logical edge, direction, iteration,
// samples).  The logical edge of a bridge is the bridge; of a P2P message, the layer boundary it
// crosses ("llm:layer2"), which both layouts have only where both cut the module there.  Within
// one (logical edge, direction, iteration) the two runs' messages are gathered into blocks of
// samples both runs' message boundaries share (a fan-in's two halves against one whole), and
// each block is one item, judged by its values concatenated in sample order (level full), by
// checksums or norms where it is one message on each side, else by the norm of its messages.

// One message of a block: its group and, for ordering, its first sample.
struct SpanKey {
  std::string logical;
  int direction = 0, iteration = -1;
  auto operator<=>(const SpanKey&) const = default;
};

std::string logicalEdgeOf(const TGroup& g) {
  const std::string& edge = g.key.edge.str();
  if (g.boundaryLayer < 0) return edge;  // a bridge
  return edge.substr(0, edge.find(':')) + ":layer" + std::to_string(g.boundaryLayer);
}

bool placedBySamples(const TGroup& g) {
  return !g.aligned && g.samples > 0;
}

// The groups of both runs placed by samples, per logical key, each side in sample order.
using Spans = std::map<SpanKey, std::pair<std::vector<const TGroup*>, std::vector<const TGroup*>>>;
Spans spansOf(const std::vector<TGroup>& ta, const std::vector<TGroup>& tb) {
  Spans out;
  for (const auto* side : {&ta, &tb}) {
    for (const TGroup& g : *side) {
      if (!placedBySamples(g)) continue;
      auto& lists = out[{logicalEdgeOf(g), g.key.direction, g.key.iteration}];
      (side == &ta ? lists.first : lists.second).push_back(&g);
    }
  }
  auto byFirst = [](const TGroup* x, const TGroup* y) { return x->firstSample < y->firstSample; };
  for (auto& [key, lists] : out) {
    std::stable_sort(lists.first.begin(), lists.first.end(), byFirst);
    std::stable_sort(lists.second.begin(), lists.second.end(), byFirst);
  }
  return out;
}

// Block index of each message: blocks end at the sample boundaries both sides share.
std::vector<std::pair<std::vector<const TGroup*>, std::vector<const TGroup*>>> blocksOf(
    const std::vector<const TGroup*>& xa, const std::vector<const TGroup*>& xb) {
  std::vector<std::pair<std::vector<const TGroup*>, std::vector<const TGroup*>>> blocks;
  if (xa.empty() || xb.empty()) {  // a boundary one layout lacks: each message its own item
    for (const TGroup* g : xa) blocks.push_back({{g}, {}});
    for (const TGroup* g : xb) blocks.push_back({{}, {g}});
    return blocks;
  }
  std::set<int64_t> endsA, common;
  for (const TGroup* g : xa) endsA.insert(g->firstSample + g->samples);
  for (const TGroup* g : xb)
    if (endsA.count(g->firstSample + g->samples)) common.insert(g->firstSample + g->samples);
  const std::vector<int64_t> ends(common.begin(), common.end());
  blocks.resize(ends.size() + 1);
  auto blockOf = [&](const TGroup* g) {
    return static_cast<size_t>(
        std::lower_bound(ends.begin(), ends.end(), g->firstSample + g->samples) - ends.begin());
  };
  for (const TGroup* g : xa) blocks[blockOf(g)].first.push_back(g);
  for (const TGroup* g : xb) blocks[blockOf(g)].second.push_back(g);
  if (blocks.back().first.empty() && blocks.back().second.empty()) blocks.pop_back();
  return blocks;
}

// A block's messages' values concatenated along the sample dimension, in sample order: each
// message is [..., samples, ...] with the samples in the dimension of that extent (the engine's
// [sequence, samples, hidden]; the outermost such dimension).  False when a message has no
// payload or its shape does not show its samples.
bool concatenatedValues(const RunModel& run, const std::vector<const TGroup*>& block,
                        std::vector<double>* out) {
  out->clear();
  std::vector<std::vector<double>> parts(block.size());
  size_t outer = 0, dim = 0;
  for (size_t i = 0; i < block.size(); ++i) {
    const int64_t idx = block[i]->send >= 0 ? block[i]->send : block[i]->recv;
    if (!decodeTransfer(run, idx, &parts[i])) return false;
    const auto& shape = run.transfers[idx].shape.vec();
    auto at = std::find(shape.begin(), shape.end(), int64_t{block[i]->samples});
    if (at == shape.end()) return false;
    const size_t d = static_cast<size_t>(at - shape.begin());
    size_t o = 1;
    for (size_t k = 0; k < d; ++k) o *= static_cast<size_t>(shape[k]);
    if (i == 0) {
      outer = o;
      dim = d;
    } else if (o != outer || d != dim) {
      return false;
    }
  }
  if (outer == 0) return false;
  for (size_t o = 0; o < outer; ++o) {
    for (const auto& p : parts) {
      const size_t inner = p.size() / outer;
      out->insert(out->end(), p.begin() + static_cast<std::ptrdiff_t>(o * inner),
                  p.begin() + static_cast<std::ptrdiff_t>((o + 1) * inner));
    }
  }
  return true;
}

// The L2 norm of a block's messages together (NaN when one has no stats).
double blockNorm(const RunModel& run, const std::vector<const TGroup*>& block) {
  double sq = 0;
  for (const TGroup* g : block) {
    const double n = transferNorm(run, g->send >= 0 ? g->send : g->recv);
    sq += n * n;
  }
  return std::sqrt(sq);
}

int64_t coveredSamples(const std::vector<const TGroup*>& block) {
  int64_t n = 0;
  for (const TGroup* g : block) n += g->samples;
  return n;
}

// One block's item, named by its logical key and samples.  Each side's first message stands
// for the block (records, causal order); one message on each side carrying the same samples is
// judged as any message (values, checksums, norms), several by the block's concatenated
// values or its norm.  `boundaryInA/B`: whether that run has this logical edge at all (else
// the block is not aligned: that layout never cuts there), not merely these samples.
AlignedItem blockItem(const AlignContext& c, const SpanKey& key,
                      const std::vector<const TGroup*>& xa, const std::vector<const TGroup*>& xb,
                      bool boundaryInA, bool boundaryInB, bool sameLayout) {
  std::optional<TGroup> x, y;
  if (!xa.empty()) x = *xa.front();
  if (!xb.empty()) y = *xb.front();
  if (x) x->aligned = true;
  if (y) y->aligned = true;
  std::vector<double> va, vb;
  AlignedItem it = transferItem(c, x ? &*x : nullptr, y ? &*y : nullptr, sameLayout, va, vb);
  const auto& all = xa.empty() ? xb : xa;
  const int64_t last = all.back()->firstSample + all.back()->samples - 1;
  it.key = key.logical + " " + events::toString(it.direction) + " it" +
           std::to_string(key.iteration) + " samples " + std::to_string(all.front()->firstSample) +
           "-" + std::to_string(last);
  if (!x || !y) {
    if (!(x ? boundaryInB : boundaryInA)) it.state = ItemState::NotAligned;
    return it;
  }
  const int64_t na = coveredSamples(xa), nb = coveredSamples(xb);
  // Gradient messages of layouts that normalise the loss over other sample counts differ by
  // that factor: compared per unit of loss gradient (AlignContext::gradientScaleA).
  const bool rescale =
      it.direction == Direction::Gradient && na == nb && c.gradientScaleA != c.gradientScaleB;
  if (xa.size() == 1 && xb.size() == 1 && na == nb && !rescale) return it;
  const double sa = rescale ? c.gradientScaleA : 1, sb = rescale ? c.gradientScaleB : 1;
  it.valueA = blockNorm(c.a, xa) / sa;
  it.valueB = blockNorm(c.b, xb) / sb;
  it.checksumA = it.checksumB = 0;  // a checksum is of one message, not of a block or a scale
  it.evidence = Evidence::None;
  it.distance = 0;
  const double tol = c.rule.bound(ValueKind::Transfer, key.iteration);
  if (na != nb) {
    it.state = na > nb ? ItemState::OnlyA : ItemState::OnlyB;  // samples only one run sent
  } else if (concatenatedValues(c.a, xa, &va) && concatenatedValues(c.b, xb, &vb)) {
    for (double& v : va) v /= sa;
    for (double& v : vb) v /= sb;
    judgeByValues(it, va, vb, 0.0, tol);
  } else if (std::isfinite(it.valueA) && std::isfinite(it.valueB)) {
    judgeByNorms(it, it.valueA, it.valueB, 0.0, tol);
  } else {
    it.state = ItemState::Unjudged;
  }
  return it;
}

void alignBySamples(const AlignContext& c, Alignment& out) {
  const Spans spans = spansOf(c.sideA->groups, c.sideB->groups);
  std::set<std::pair<std::string, int>> inA, inB;  // (logical edge, direction) each run has
  for (const auto& [key, lists] : spans) {
    if (!lists.first.empty()) inA.insert({key.logical, key.direction});
    if (!lists.second.empty()) inB.insert({key.logical, key.direction});
  }
  for (const auto& [key, lists] : spans) {
    const bool hasA = inA.count({key.logical, key.direction}) > 0;
    const bool hasB = inB.count({key.logical, key.direction}) > 0;
    for (const auto& [xa, xb] : blocksOf(lists.first, lists.second))
      out.items.push_back(blockItem(c, key, xa, xb, hasA, hasB, out.sameLayout));
  }
}

}  // namespace

// Both runs' groups are sorted by key: walked together, every key of either in key order.
// Messages that two layouts key differently are aligned by their samples instead (both runs'
// sample layouts known and the same global batch).
void alignTransfers(const AlignContext& c, Alignment& out) {
  const auto& ta = c.sideA->groups;
  const auto& tb = c.sideB->groups;
  const bool bySamples = c.layoutsKnown && out.sameGlobalBatch;
  std::vector<double> va, vb;
  for (size_t ia = 0, ib = 0; ia < ta.size() || ib < tb.size();) {
    const bool takeA = ia < ta.size() && (ib == tb.size() || !(tb[ib].key < ta[ia].key));
    const bool takeB = ib < tb.size() && (ia == ta.size() || !(ta[ia].key < tb[ib].key));
    const TGroup* x = takeA ? &ta[ia++] : nullptr;
    const TGroup* y = takeB ? &tb[ib++] : nullptr;
    if (bySamples && (x ? placedBySamples(*x) : placedBySamples(*y)) &&
        (!x || !y || placedBySamples(*y)))
      continue;
    out.items.push_back(transferItem(c, x, y, out.sameLayout, va, vb));
  }
  if (bySamples) alignBySamples(c, out);
}

}  // namespace stagescope::analysis::align
