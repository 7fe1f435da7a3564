#include "tests/support/SyntheticRun.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "core/model/Pairing.h"

namespace stagescope::testing {
namespace {

using events::ActionKind;
using events::BridgeRole;
using events::Direction;
using events::EdgeKind;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 29;
  return h;
}
uint64_t mixString(uint64_t h, const std::string& s) {
  uint64_t f = 1469598103934665603ULL;
  for (unsigned char c : s) f = (f ^ c) * 1099511628211ULL;
  return mix(h, f);
}
double unit(uint64_t h) {
  return static_cast<double>(mix(h, 77) >> 11) * (1.0 / 9007199254740992.0);
}

// Collectives (never recorded) of module i use edge id kCollectiveEdge + i: a colocated rank
// reduces each of its modules with that module's own DP peers.
constexpr int kCollectiveEdge = 200;

struct Msg {
  int edge = 0;  // index into Sim::edges, or kCollectiveEdge + module
  Direction dir = Direction::Activation;
  int src = -1, dst = -1;
  EdgeKind edgeKind = EdgeKind::P2P;
  BridgeRole role = BridgeRole::None;
  bool record = true;
  int srcDp = 0;  // logical data-parallel replica of the sender (checksum identity)
  int srcModule = -1;
  int srcGroup = 0, dstGroup = 1;  // ranks inside the group used for the message
};

struct Step {
  ActionKind kind = ActionKind::Forward;
  int mb = -1;
  std::vector<Msg> sends, waits;
  std::vector<int32_t> peers;
  int64_t cost = 0;
  int module = -1;  // index into spec.modules; -1: rank-wide (the optimizer step)
  int stage = -1;
};

// One module's stage a rank holds.  A colocated rank holds several (modules sharing ranks).
struct RankPos {
  int module = -1;
  int tp = 0, pp = 0, dp = 0;
};

struct Layout {
  const SyntheticSpec& spec;
  int llm = -1;
  int maxEncPP = 0;
  int totalStages = 0;
  int world = 0;
  std::vector<std::vector<RankPos>> pos;  // [rank]: by global stage, then spec order
  std::vector<std::string> edges;

  explicit Layout(const SyntheticSpec& s) : spec(s) {
    for (size_t i = 0; i < s.modules.size(); ++i) {
      const auto& m = s.modules[i];
      if (m.kind == "llm")
        llm = static_cast<int>(i);
      else
        maxEncPP = std::max(maxEncPP, m.pp);
      world = std::max(world, m.offset + m.tp * m.pp * m.dp);
    }
    if (llm < 0) throw std::invalid_argument("synthetic spec: no llm module");
    totalStages = maxEncPP + s.modules[llm].pp;
    pos.assign(world, {});
    for (size_t i = 0; i < s.modules.size(); ++i) {
      const auto& m = s.modules[i];
      for (int d = 0; d < m.dp; ++d)
        for (int p = 0; p < m.pp; ++p)
          for (int t = 0; t < m.tp; ++t)
            pos[rankOf(static_cast<int>(i), t, p, d)].push_back({static_cast<int>(i), t, p, d});
    }
    for (auto& list : pos)
      std::stable_sort(list.begin(), list.end(), [&](const RankPos& a, const RankPos& b) {
        return globalStage(a) < globalStage(b);
      });
  }
  int globalStage(const RankPos& p) const { return firstStage(p.module) + p.pp; }
  // The position of `module` on `rank` (the rank holds it).
  const RankPos& posOf(int rank, int module) const {
    for (const auto& p : pos[rank])
      if (p.module == module) return p;
    throw std::logic_error("synthetic layout: rank " + std::to_string(rank) + " lacks module " +
                           spec.modules[module].name);
  }
  int rankOf(int module, int tp, int pp, int dp) const {
    const auto& m = spec.modules[module];
    return m.offset + tp + m.tp * (pp + m.pp * dp);
  }
  int firstStage(int module) const {
    return module == llm ? maxEncPP : maxEncPP - spec.modules[module].pp;
  }
  int edgeId(const std::string& name) {
    auto it = std::find(edges.begin(), edges.end(), name);
    if (it != edges.end()) return static_cast<int>(it - edges.begin());
    edges.push_back(name);
    return static_cast<int>(edges.size()) - 1;
  }
  std::string p2pEdge(int module, int pp) const {
    return spec.modules[module].name + ":pp" + std::to_string(pp) + "->pp" + std::to_string(pp + 1);
  }
  // Destination llm dp replicas of an encoder replica, and the source replicas of an llm one.
  std::vector<int> bridgeDestDps(int enc, int dp) const {
    int s = spec.modules[enc].dp, d = spec.modules[llm].dp;
    if (s >= d) return {dp / (s / d)};
    std::vector<int> out;
    for (int k = 0; k < d / s; ++k) out.push_back(dp * (d / s) + k);
    return out;
  }
  std::vector<int> bridgeSrcDps(int enc, int dp) const {
    int s = spec.modules[enc].dp, d = spec.modules[llm].dp;
    if (s <= d) return {dp / (d / s)};
    std::vector<int> out;
    for (int k = 0; k < s / d; ++k) out.push_back(dp * (s / d) + k);
    return out;
  }
  BridgeRole bridgeRole(int enc) const {
    int s = spec.modules[enc].dp, d = spec.modules[llm].dp;
    return s == d ? BridgeRole::OneToOne : (s > d ? BridgeRole::FanIn : BridgeRole::FanOut);
  }
  int layersOfStage(int module, int pp) const {
    const auto& m = spec.modules[module];
    int base = m.layers / m.pp, extra = m.layers % m.pp;
    return base + (pp < extra ? 1 : 0);
  }
  int firstLayerOfStage(int module, int pp) const {
    int l = 0;
    for (int p = 0; p < pp; ++p) l += layersOfStage(module, p);
    return l;
  }
};

// One iteration of a rank's 1F1B list, with the messages each step sends and waits for.  A
// colocated rank runs one 1F1B order over its modules: each microbatch's forward through its
// stages by global stage (encoders, then the stage that consumes them), backward in reverse;
// warmup from its last global stage.  A hand-off between two of its modules is a message to
// itself (a local hand-off: src == dst).
std::vector<Step> rankTemplate(Layout& L, int rank) {
  const auto& spec = L.spec;
  const auto& positions = L.pos[rank];
  const int m = spec.microbatches;
  int lastStage = 0;
  for (const auto& p : positions) lastStage = std::max(lastStage, L.globalStage(p));
  const int warmup = std::min(L.totalStages - lastStage - 1, m);

  auto fwdOf = [&](std::vector<Step>& out, const RankPos& p, int mb) {
    const auto& mod = spec.modules[p.module];
    const bool isLlm = p.module == L.llm;
    const int64_t fwdCost =
        static_cast<int64_t>(std::max(1, L.layersOfStage(p.module, p.pp)) * 350000 *
                             (0.45 + 0.55 / mod.tp) * (isLlm ? 1.0 : 0.8));
    const Step base{ActionKind::Forward, mb, {}, {}, {}, 0, p.module, p.pp};
    Step rf = base;
    rf.kind = ActionKind::RecvForward;
    rf.cost = 20000;
    if (p.pp > 0) {
      int src = L.rankOf(p.module, p.tp, p.pp - 1, p.dp);
      rf.waits.push_back({L.edgeId(L.p2pEdge(p.module, p.pp - 1)), Direction::Activation, src, rank,
                          EdgeKind::P2P, BridgeRole::None, true, p.dp, p.module, p.pp - 1, p.pp});
      rf.peers.push_back(src);
    } else if (isLlm) {
      int leader = L.rankOf(p.module, 0, 0, p.dp);
      for (size_t e = 0; e < spec.modules.size(); ++e) {
        if (static_cast<int>(e) == L.llm) continue;
        const auto& enc = spec.modules[e];
        int eid = L.edgeId(enc.name + "->" + mod.name);
        for (int sdp : L.bridgeSrcDps(static_cast<int>(e), p.dp)) {
          int src = L.rankOf(static_cast<int>(e), enc.tp - 1, enc.pp - 1, sdp);
          rf.waits.push_back({eid, Direction::Activation, src, leader, EdgeKind::Bridge,
                              L.bridgeRole(static_cast<int>(e)), rank == leader, sdp,
                              static_cast<int>(e), 0, 1});
          if (rank == leader) rf.peers.push_back(src);
        }
      }
      // A TP peer of the bridge leader gets the activation by a TP broadcast, not a message:
      // no peers (as the engine plans it).
    }
    if (!rf.waits.empty()) out.push_back(rf);
    Step f = base;
    f.cost = fwdCost;
    out.push_back(f);
    Step sf = base;
    sf.kind = ActionKind::SendForward;
    sf.cost = 30000;
    if (p.pp + 1 < mod.pp) {
      int dst = L.rankOf(p.module, p.tp, p.pp + 1, p.dp);
      sf.sends.push_back({L.edgeId(L.p2pEdge(p.module, p.pp)), Direction::Activation, rank, dst,
                          EdgeKind::P2P, BridgeRole::None, true, p.dp, p.module, p.pp, p.pp + 1});
      sf.peers.push_back(dst);
    } else if (!isLlm && p.tp == mod.tp - 1) {
      int eid = L.edgeId(mod.name + "->" + spec.modules[L.llm].name);
      for (int ddp : L.bridgeDestDps(p.module, p.dp)) {
        int dst = L.rankOf(L.llm, 0, 0, ddp);
        sf.sends.push_back({eid, Direction::Activation, rank, dst, EdgeKind::Bridge,
                            L.bridgeRole(p.module), true, p.dp, p.module, 0, 1});
        sf.peers.push_back(dst);
      }
    }
    if (!sf.sends.empty()) out.push_back(sf);
    return fwdCost;
  };
  auto bwdOf = [&](std::vector<Step>& out, const RankPos& p, int mb, int64_t fwdCost) {
    const auto& mod = spec.modules[p.module];
    const bool isLlm = p.module == L.llm;
    const Step base{ActionKind::Backward, mb, {}, {}, {}, 0, p.module, p.pp};
    Step rb = base;
    rb.kind = ActionKind::RecvBackward;
    rb.cost = 20000;
    if (p.pp + 1 < mod.pp) {
      int src = L.rankOf(p.module, p.tp, p.pp + 1, p.dp);
      rb.waits.push_back({L.edgeId(L.p2pEdge(p.module, p.pp)), Direction::Gradient, src, rank,
                          EdgeKind::P2P, BridgeRole::None, true, p.dp, p.module, p.pp + 1, p.pp});
      rb.peers.push_back(src);
    } else if (!isLlm) {
      int leader = L.rankOf(p.module, mod.tp - 1, mod.pp - 1, p.dp);
      int eid = L.edgeId(mod.name + "->" + spec.modules[L.llm].name);
      for (int ddp : L.bridgeDestDps(p.module, p.dp)) {
        int src = L.rankOf(L.llm, 0, 0, ddp);
        rb.waits.push_back({eid, Direction::Gradient, src, leader, EdgeKind::Bridge,
                            L.bridgeRole(p.module), rank == leader, ddp, L.llm, 1, 0});
        if (rank == leader) rb.peers.push_back(src);
      }
    }
    if (!rb.waits.empty()) out.push_back(rb);
    Step b = base;
    b.cost = fwdCost * 2;
    out.push_back(b);
    Step sb = base;
    sb.kind = ActionKind::SendBackward;
    sb.cost = 30000;
    if (p.pp > 0) {
      int dst = L.rankOf(p.module, p.tp, p.pp - 1, p.dp);
      sb.sends.push_back({L.edgeId(L.p2pEdge(p.module, p.pp - 1)), Direction::Gradient, rank, dst,
                          EdgeKind::P2P, BridgeRole::None, true, p.dp, p.module, p.pp, p.pp - 1});
      sb.peers.push_back(dst);
    } else if (isLlm && p.tp == 0) {
      for (size_t e = 0; e < spec.modules.size(); ++e) {
        if (static_cast<int>(e) == L.llm) continue;
        const auto& enc = spec.modules[e];
        int eid = L.edgeId(enc.name + "->" + mod.name);
        for (int sdp : L.bridgeSrcDps(static_cast<int>(e), p.dp)) {
          int dst = L.rankOf(static_cast<int>(e), enc.tp - 1, enc.pp - 1, sdp);
          sb.sends.push_back({eid, Direction::Gradient, rank, dst, EdgeKind::Bridge,
                              L.bridgeRole(static_cast<int>(e)), true, p.dp, p.module, 1, 0});
          sb.peers.push_back(dst);
        }
      }
    }
    if (!sb.sends.empty()) out.push_back(sb);
  };
  std::vector<int64_t> fwdCost(positions.size(), 0);
  auto fwd = [&](std::vector<Step>& out, int mb) {
    for (size_t k = 0; k < positions.size(); ++k) fwdCost[k] = fwdOf(out, positions[k], mb);
  };
  auto bwd = [&](std::vector<Step>& out, int mb) {
    for (size_t k = positions.size(); k-- > 0;) bwdOf(out, positions[k], mb, fwdCost[k]);
  };

  std::vector<Step> out;
  for (int i = 0; i < warmup; ++i) fwd(out, i);
  for (int j = 0; j < m - warmup; ++j) {
    fwd(out, warmup + j);
    bwd(out, j);
  }
  for (int j = std::max(0, m - warmup); j < m; ++j) bwd(out, j);
  for (const auto& p : positions) {
    const auto& mod = spec.modules[p.module];
    Step red{ActionKind::DpReduce, -1, {}, {}, {}, 250000, p.module, p.pp};
    for (int d = 0; d < mod.dp; ++d) {
      if (d == p.dp) continue;
      int peer = L.rankOf(p.module, p.tp, p.pp, d);
      red.peers.push_back(peer);
      red.sends.push_back({kCollectiveEdge + p.module, Direction::Gradient, rank, peer,
                           EdgeKind::P2P, BridgeRole::None, false, p.dp, p.module});
      red.waits.push_back({kCollectiveEdge + p.module, Direction::Gradient, peer, rank,
                           EdgeKind::P2P, BridgeRole::None, false, d, p.module});
    }
    out.push_back(red);
  }
  // The optimizer step is the rank's: named after its module, rank-wide ("") on a colocated
  // rank.
  const bool one = positions.size() == 1;
  out.push_back({ActionKind::OptimizerStep,
                 -1,
                 {},
                 {},
                 {},
                 150000,
                 one ? positions[0].module : -1,
                 one ? positions[0].pp : -1});
  return out;
}

uint64_t msgKey(int iteration, int mb, const Msg& msg) {
  uint64_t k = static_cast<uint64_t>(iteration);
  k = (k << 12) | static_cast<uint64_t>(mb + 1);
  k = (k << 8) | static_cast<uint64_t>(msg.edge);
  k = (k << 1) | static_cast<uint64_t>(msg.dir);
  k = (k << 12) | static_cast<uint64_t>(msg.src);
  k = (k << 12) | static_cast<uint64_t>(msg.dst);
  return k;
}

bool diverged(const SyntheticSpec& s, int iteration, int mb) {
  if (s.divergeIteration < 0) return false;
  if (iteration != s.divergeIteration) return iteration > s.divergeIteration;
  return mb < 0 || mb >= s.divergeMicrobatch;
}

}  // namespace

size_t countEvents(const model::RunModel& model) {
  size_t n = model.transfers.size() + model.gradients.size() + model.losses.size();
  for (const auto& a : model.actions) n += a.size();
  return n;
}

SyntheticSpec defaultSyntheticSpec() {
  SyntheticSpec s;
  s.modules = {{"vision", "encoder", 1, 2, 2, 0, 2}, {"llm", "llm", 2, 3, 1, 4, 6}};
  s.iterations = 2;
  s.microbatches = 6;
  return s;
}

SyntheticSpec alternateLayoutSpec() {
  SyntheticSpec s = defaultSyntheticSpec();
  s.modules[1].tp = 1;
  return s;
}

SyntheticSpec colocatedSyntheticSpec() {
  SyntheticSpec s;
  s.modules = {{"vision", "encoder", 1, 2, 1, 0, 2},
               {"audio", "encoder", 1, 1, 1, 1, 1},
               {"llm", "llm", 1, 3, 1, 1, 6}};
  s.iterations = 2;
  s.microbatches = 4;
  return s;
}

SyntheticSpec colocatedEncodersSpec() {
  SyntheticSpec s;
  s.modules = {{"vision", "encoder", 2, 1, 1, 0, 2},
               {"audio", "encoder", 2, 1, 1, 0, 2},
               {"llm", "llm", 1, 2, 1, 2, 4}};
  s.iterations = 2;
  s.microbatches = 4;
  return s;
}

SyntheticSpec benchmarkSpec(size_t events) {
  SyntheticSpec s;
  s.modules = {{"vision", "encoder", 1, 2, 2, 0, 2}, {"llm", "llm", 2, 4, 2, 4, 8}};
  s.microbatches = 16;
  s.paramsPerLayer = 1;
  s.iterations = 1;
  size_t perIteration = countEvents(makeSyntheticRun(s));
  s.iterations = static_cast<int>(std::max<size_t>(1, (events + perIteration - 1) / perIteration));
  return s;
}

void buildPairs(model::RunModel& model) {
  model.pairs = model::pairTransfers(model.transfers);
}

void endRunEarly(model::RunModel& model, const std::vector<int64_t>& cutNs) {
  const int world = static_cast<int>(model.actions.size());
  std::vector<std::set<std::pair<int, int>>> kept(world);  // (iteration, seq)
  std::vector<int> firstUnfinishedIteration(world, INT32_MAX);
  for (int r = 0; r < world; ++r) {
    const int64_t cut =
        model.minTimeNs + (r < static_cast<int>(cutNs.size()) ? cutNs[r] : INT64_MAX / 2);
    auto& acts = model.actions[r];
    std::vector<events::ActionRecord> keep;
    for (const auto& a : acts) {
      if (a.endNs <= cut) {
        keep.push_back(a);
        kept[r].emplace(a.iteration, a.seq);
      } else {
        firstUnfinishedIteration[r] = std::min(firstUnfinishedIteration[r], a.iteration);
      }
    }
    acts = std::move(keep);
  }
  auto rankOk = [&](int r) { return r >= 0 && r < world; };
  std::vector<events::TransferRecord> transfers;
  for (auto& t : model.transfers)
    if (rankOk(t.rank) && kept[t.rank].count({t.iteration, t.actionSeq}))
      transfers.push_back(std::move(t));
  model.transfers = std::move(transfers);
  std::vector<events::GradientRecord> gradients;
  for (auto& g : model.gradients)
    if (!rankOk(g.rank) || g.iteration < firstUnfinishedIteration[g.rank])
      gradients.push_back(std::move(g));
  model.gradients = std::move(gradients);
  std::vector<events::LossRecord> losses;
  for (auto& l : model.losses)
    if (!rankOk(l.rank) || l.iteration < firstUnfinishedIteration[l.rank])
      losses.push_back(std::move(l));
  model.losses = std::move(losses);
  buildPairs(model);
  int64_t maxT = model.minTimeNs;
  for (const auto& acts : model.actions)
    for (const auto& a : acts) maxT = std::max(maxT, a.endNs);
  model.maxTimeNs = maxT;
}

model::RunModel makeSyntheticRun(const SyntheticSpec& spec) {
  Layout L(spec);
  const int world = L.world;
  const int m = spec.microbatches;
  model::RunModel model;
  model.path.clear();  // generated, not read from a file
  model.schemaVersion = 1;
  auto& info = model.info;
  info.runId = "synthetic-" + std::to_string(spec.seed);
  info.worldSize = world;
  info.iterations = spec.iterations;
  info.microbatches = m;
  info.level = events::RecordLevel::Stats;
  info.versionStagescope = "0.1.0";
  info.status = events::RunStatus::Completed;
  info.startUnixMs = 1700000000000;
  for (const auto& sm : spec.modules) {
    events::ModuleInfo mi;
    mi.name = sm.name;
    mi.kind = sm.kind;
    mi.tp = sm.tp;
    mi.pp = sm.pp;
    mi.dp = sm.dp;
    mi.offset = sm.offset;
    mi.layers = sm.layers;
    if (sm.kind != "llm") mi.downstream = {spec.modules[L.llm].name};
    info.modules.push_back(mi);
  }

  std::vector<std::vector<Step>> templates(world);
  for (int r = 0; r < world; ++r) {
    // One row per module the rank holds (a colocated rank: several), as the engine writes them.
    int lastStage = 0;
    for (const RankPos& p : L.pos[r]) lastStage = std::max(lastStage, L.globalStage(p));
    for (const RankPos& p : L.pos[r]) {
      events::RankInfo ri;
      ri.rank = r;
      ri.module = spec.modules[p.module].name;
      ri.tp = p.tp;
      ri.pp = p.pp;
      ri.dp = p.dp;
      ri.globalStage = L.globalStage(p);
      ri.totalStages = L.totalStages;
      ri.warmup = std::min(L.totalStages - lastStage - 1, m);
      ri.host = "synthetic";
      ri.device = "cpu";
      ri.pid = 4000 + r;
      model.ranks.push_back(std::move(ri));
    }
    if (L.pos[r].empty()) {
      events::RankInfo ri;  // a rank no module places (a gap in the layout)
      ri.rank = r;
      model.ranks.push_back(std::move(ri));
    }
    if (!L.pos[r].empty()) templates[r] = rankTemplate(L, r);
  }
  model::sortRankRows(model.ranks, info.modules);

  // Plan records (no times).
  model.plan.assign(world, {});
  model.actions.assign(world, {});
  for (int r = 0; r < world; ++r) {
    for (int it = 0; it < spec.iterations; ++it) {
      for (size_t s = 0; s < templates[r].size(); ++s) {
        const Step& st = templates[r][s];
        events::ActionRecord a;
        a.rank = r;
        a.iteration = it;
        a.seq = static_cast<int32_t>(s);
        a.kind = st.kind;
        a.microbatch = st.mb;
        a.module = st.module >= 0 ? spec.modules[st.module].name : "";
        a.stage = st.stage;
        a.peers = st.peers;
        model.plan[r].push_back(a);
      }
    }
    model.actions[r].reserve(model.plan[r].size());
  }

  // Simulate: sends never block; a receive ends when all its messages have arrived.
  std::unordered_map<uint64_t, int64_t> ready;
  ready.reserve(static_cast<size_t>(world) * templates[0].size() * spec.iterations);
  std::vector<size_t> next(world, 0);
  std::vector<int64_t> clock(world, 0);
  std::vector<size_t> posted(world, SIZE_MAX);
  const auto skew = [&](int r) {
    return r < static_cast<int>(spec.clockSkewNs.size()) ? spec.clockSkewNs[r] : 0;
  };
  auto& transfers = model.transfers;
  auto makeTransfer = [&](const Msg& msg, events::Side side, int it, int mb, int seq, int64_t start,
                          int64_t end) {
    events::TransferRecord t;
    t.side = side;
    t.rank = side == events::Side::Send ? msg.src : msg.dst;
    t.srcRank = msg.src;
    t.dstRank = msg.dst;
    t.srcGroupRank = msg.srcGroup;
    t.dstGroupRank = msg.dstGroup;
    t.edge = L.edges[msg.edge];
    t.edgeKind = msg.edgeKind;
    t.role = msg.role;
    t.direction = msg.dir;
    t.iteration = it;
    t.microbatch = mb;
    t.actionSeq = seq;
    const auto& srcMod = spec.modules[msg.srcModule];
    int64_t tokens = srcMod.kind == "llm" ? 16 : 8;
    int64_t batch = 4 / std::max(1, srcMod.dp) + 1;
    t.shape = {batch, tokens, 64};
    t.dtype = "float32";
    t.bytes = batch * tokens * 64 * 4;
    uint64_t h = mixString(spec.seed, t.edge);
    h = mix(mix(mix(mix(h, static_cast<uint64_t>(msg.dir)), it), mb + 1), msg.srcDp);
    if (diverged(spec, it, mb)) h = mix(h, 0xd1fULL);
    t.checksum = h | 1;
    if (side == events::Side::Recv && it == spec.corruptIteration && mb == spec.corruptMicrobatch)
      t.checksum ^= 0x5a5a0000ULL;
    t.hasStats = true;
    double u = unit(h);
    t.stats.mean = (u - 0.5) * 0.2;
    t.stats.min = -2.0 - u;
    t.stats.max = 2.0 + u;
    t.stats.numel = batch * tokens * 64;
    t.stats.l2 = std::sqrt(static_cast<double>(t.stats.numel)) * (0.5 + 0.1 * u);
    if (msg.dir == Direction::Activation && it == spec.nanIteration && mb == spec.nanMicrobatch)
      t.stats.nanCount = 3;
    t.startNs = start + skew(t.rank);
    t.endNs = end + skew(t.rank);
    transfers.push_back(std::move(t));
  };

  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < world; ++r) {
      const auto& tpl = templates[r];
      if (tpl.empty()) continue;
      const size_t total = tpl.size() * spec.iterations;
      while (next[r] < total) {
        const int it = static_cast<int>(next[r] / tpl.size());
        const int seq = static_cast<int>(next[r] % tpl.size());
        const Step& st = tpl[seq];
        if (st.kind == ActionKind::DpReduce && posted[r] != next[r]) {
          // A collective: each member announces its arrival before waiting for the others.
          for (const Msg& s : st.sends) ready[msgKey(it, st.mb, s)] = clock[r];
          posted[r] = next[r];
        }
        int64_t arrive = 0;
        bool ok = true;
        for (const Msg& w : st.waits) {
          auto f = ready.find(msgKey(it, st.mb, w));
          if (f == ready.end()) {
            ok = false;
            break;
          }
          arrive = std::max(arrive, f->second);
        }
        if (!ok) break;
        const int64_t start = clock[r];
        uint64_t jh = mix(mix(spec.seed, r), next[r]);
        int64_t cost = static_cast<int64_t>(st.cost * (0.92 + 0.16 * unit(jh)));
        int64_t end = start + cost;
        if (!st.waits.empty()) {
          int64_t latency = st.kind == ActionKind::DpReduce ? 0 : 60000;
          if (unit(mix(jh, 3)) < spec.slowFraction) latency += 400000;
          end = std::max(end, arrive + latency + (st.kind == ActionKind::DpReduce ? cost : 0));
        }
        for (const Msg& s : st.sends) ready[msgKey(it, st.mb, s)] = start;
        events::ActionRecord a = model.plan[r][next[r]];
        a.startNs = start + skew(r);
        a.endNs = end + skew(r);
        model.actions[r].push_back(std::move(a));
        for (const Msg& s : st.sends)
          if (s.record) makeTransfer(s, events::Side::Send, it, st.mb, seq, start, end);
        for (const Msg& w : st.waits)
          if (w.record) makeTransfer(w, events::Side::Recv, it, st.mb, seq, start, end);
        clock[r] = end + 4000;
        ++next[r];
        progress = true;
      }
    }
  }
  for (int r = 0; r < world; ++r) {
    if (next[r] != templates[r].size() * spec.iterations)
      throw std::logic_error(
          "synthetic schedule deadlocked on rank " + std::to_string(r) + " at step " +
          std::to_string(next[r]) + " kind " +
          events::toString(templates[r][next[r] % templates[r].size()].kind) + " mb " +
          std::to_string(templates[r][next[r] % templates[r].size()].mb) + " waits " +
          std::to_string(templates[r][next[r] % templates[r].size()].waits.size()));
  }

  if (spec.deviationRank >= 0 && spec.deviationRank < world) {
    auto& acts = model.actions[spec.deviationRank];
    for (size_t i = 0; i + 1 < acts.size(); ++i) {
      if (acts[i].kind != ActionKind::Forward) continue;
      for (size_t j = i + 1; j < acts.size(); ++j) {
        if (acts[j].kind == ActionKind::Backward) {
          std::swap(acts[i].kind, acts[j].kind);
          std::swap(acts[i].microbatch, acts[j].microbatch);
          i = acts.size();
          break;
        }
      }
    }
  }

  // Gradients and losses.
  if (spec.gradients) {
    static const char* kParams[] = {"attn.qkv.weight", "mlp.fc1.weight", "norm.weight",
                                    "mlp.fc2.weight"};
    for (int it = 0; it < spec.iterations; ++it) {
      for (int r = 0; r < world; ++r) {
        for (const RankPos& p : L.pos[r]) {
          const auto& mod = spec.modules[p.module];
          int first = L.firstLayerOfStage(p.module, p.pp);
          for (int l = first; l < first + L.layersOfStage(p.module, p.pp); ++l) {
            for (int k = 0; k < std::min(spec.paramsPerLayer, 4); ++k) {
              std::string name = mod.name + ".layers." + std::to_string(l) + "." + kParams[k];
              bool replicated = k == 2;
              int64_t rows = replicated ? 64 : (k == 0 ? 192 : 256);
              std::vector<int64_t> full =
                  replicated ? std::vector<int64_t>{64} : std::vector<int64_t>{rows, 64};
              std::vector<int64_t> shard = full;
              if (!replicated) shard[0] = rows / mod.tp;
              double base = 0.05 + 0.5 * unit(mixString(spec.seed, name)) * std::exp(-0.2 * it);
              double shardScale = replicated ? 1.0 : 1.0 / std::sqrt(static_cast<double>(mod.tp));
              auto rec = [&](events::GradPhase phase, int mb, double fullNorm) {
                events::GradientRecord g;
                g.rank = r;
                g.iteration = it;
                g.microbatch = mb;
                g.phase = phase;
                g.param = name;
                g.module = mod.name;
                g.tp = p.tp;
                g.pp = p.pp;
                g.dp = p.dp;
                const bool whole = replicated || phase == events::GradPhase::Reference;
                g.partitionDim = whole ? -1 : 0;
                g.partitionOffset = whole ? 0 : shard[0] * p.tp;
                g.shape = phase == events::GradPhase::Reference ? full : shard;
                g.fullShape = full;
                g.dtype = "float32";
                bool div = diverged(spec, it, mb);
                g.norm =
                    (phase == events::GradPhase::Reference ? fullNorm : fullNorm * shardScale) *
                    (div ? 1.013 : 1.0);
                uint64_t h = mix(
                    mix(mix(mixString(spec.seed, name), static_cast<uint64_t>(phase)), it), mb + 1);
                if (phase == events::GradPhase::Accumulated) h = mix(h, p.dp);
                if (!whole) h = mix(mix(h, g.partitionOffset), mod.tp);
                if (div) h = mix(h, 0xd1fULL);
                g.checksum = h | 1;
                g.hasStats = true;
                g.stats.numel = 1;
                for (auto d : g.shape) g.stats.numel *= d;
                g.stats.l2 = g.norm;
                g.stats.mean = (unit(h) - 0.5) * 1e-3;
                g.stats.min = -g.norm / 4;
                g.stats.max = g.norm / 4;
                if (phase == events::GradPhase::Reference) {
                  g.rank = -1;  // the single-process reference has its own records
                  model.referenceGradients.push_back(std::move(g));
                } else {
                  model.gradients.push_back(std::move(g));
                }
              };
              for (int mb = 0; mb < m; ++mb)
                rec(events::GradPhase::Accumulated, mb,
                    base * std::sqrt((mb + 1.0) / m) * (1.0 + 0.05 * (p.dp % 2)));
              rec(events::GradPhase::Reduced, -1, base);
              if (p.tp == 0 && p.dp == 0) rec(events::GradPhase::Reference, -1, base * (1 + 2e-7));
            }
          }
        }
      }
    }
  }
  const auto& llmMod = spec.modules[L.llm];
  for (int it = 0; it < spec.iterations; ++it) {
    for (int d = 0; d < llmMod.dp; ++d) {
      int r = L.rankOf(L.llm, 0, llmMod.pp - 1, d);
      double sum = 0;
      for (int mb = 0; mb < m; ++mb) {
        double v =
            3.2 * std::exp(-0.12 * it) + 0.3 * (unit(mix(mix(mix(spec.seed, it), mb), d)) - 0.5);
        if (diverged(spec, it, mb)) v += 0.02;
        if (it == spec.nanIteration && mb == spec.nanMicrobatch) v = std::nan("");
        sum += v;
        model.losses.push_back({r, it, mb, d, v});
      }
      model.losses.push_back({r, it, -1, d, sum / m});
    }
  }

  std::sort(transfers.begin(), transfers.end(), [](const auto& a, const auto& b) {
    return std::tie(a.iteration, a.microbatch, a.edge, a.direction, a.srcRank, a.dstRank, a.side) <
           std::tie(b.iteration, b.microbatch, b.edge, b.direction, b.srcRank, b.dstRank, b.side);
  });
  model.transferIds.resize(transfers.size());
  for (size_t i = 0; i < transfers.size(); ++i) model.transferIds[i] = static_cast<int64_t>(i + 1);
  std::sort(model.gradients.begin(), model.gradients.end(), [](const auto& a, const auto& b) {
    return std::tie(a.iteration, a.phase, a.param, a.tp, a.pp, a.dp, a.microbatch) <
           std::tie(b.iteration, b.phase, b.param, b.tp, b.pp, b.dp, b.microbatch);
  });
  std::sort(model.losses.begin(), model.losses.end(), [](const auto& a, const auto& b) {
    return std::tie(a.iteration, a.microbatch, a.dp, a.rank) <
           std::tie(b.iteration, b.microbatch, b.dp, b.rank);
  });
  buildPairs(model);
  model.minTimeNs = std::numeric_limits<int64_t>::max();
  model.maxTimeNs = std::numeric_limits<int64_t>::min();
  for (const auto& acts : model.actions) {
    if (acts.empty()) continue;
    for (const auto& a : acts) {
      model.minTimeNs = std::min(model.minTimeNs, a.startNs);
      model.maxTimeNs = std::max(model.maxTimeNs, a.endNs);
    }
  }
  if (model.minTimeNs > model.maxTimeNs) model.minTimeNs = model.maxTimeNs = 0;
  info.endUnixMs = info.startUnixMs + (model.maxTimeNs - model.minTimeNs) / 1000000;
  return model;
}

}  // namespace stagescope::testing
