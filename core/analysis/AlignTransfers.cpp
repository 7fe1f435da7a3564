#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <tuple>

#include "core/analysis/AlignSteps.h"
#include "core/analysis/Pairing.h"
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
};

}  // namespace

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

}  // namespace

// Both runs' groups are sorted by key: walked together, every key of either in key order.
void alignTransfers(const AlignContext& c, Alignment& out) {
  const auto& ta = c.sideA->groups;
  const auto& tb = c.sideB->groups;
  std::vector<double> va, vb;
  for (size_t ia = 0, ib = 0; ia < ta.size() || ib < tb.size();) {
    const bool takeA = ia < ta.size() && (ib == tb.size() || !(tb[ib].key < ta[ia].key));
    const bool takeB = ib < tb.size() && (ia == ta.size() || !(ta[ia].key < tb[ib].key));
    const TGroup* x = takeA ? &ta[ia++] : nullptr;
    const TGroup* y = takeB ? &tb[ib++] : nullptr;
    out.items.push_back(transferItem(c, x, y, out.sameLayout, va, vb));
  }
}

}  // namespace stagescope::analysis::align
