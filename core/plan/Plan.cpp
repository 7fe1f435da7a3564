// Per-rank 1F1B action lists (schedule.md §5.3) with the messages every communication posts.
#include "core/plan/Plan.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace stagescope::plan {
namespace {

using events::ActionKind;
using events::Direction;
using events::Side;

events::BridgeRole roleOf(const Bridge& b) {
  if (b.fanIn()) return events::BridgeRole::FanIn;
  if (b.fanOut()) return events::BridgeRole::FanOut;
  return events::BridgeRole::OneToOne;
}

std::string p2pEdge(const std::string& module, int fromPp) {
  return module + ":pp" + std::to_string(fromPp) + "->pp" + std::to_string(fromPp + 1);
}

// The links of one rank: the peers it receives activations from (and sends gradients to),
// and the peers it sends activations to (and receives gradients from).
struct Link {
  int peer;
  std::string edge;
  events::EdgeKind kind;
  events::BridgeRole role;
  std::string peerModule;
  int part, parts;
  std::vector<int> group;
  std::string groupName;
  // What an activation / a gradient message on this link carries (the same on both sides).
  std::vector<int64_t> activationShape, gradientShape;
};

// The boundary broadcasts of one side of a rank: after receiving over bridge b, the leader
// broadcasts to its boundary list.
struct BoundaryLink {
  std::string peerModule;
  int root;
  std::vector<int> ranks;
  std::string groupName;
  std::vector<int64_t> shape;  // the concatenation the root broadcasts
};

std::vector<int> sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// One stage node the rank holds: its links split into external ones (to stages at other
// positions of the pipeline) and internal ones (to a stage on these same ranks: an encoder's
// last stage and the llm's first stage in one slot, Colocation.h).
// One communication action's worth of links (even without messages on this rank: a bridge
// member only joins the boundary broadcast).
struct LinkGroup {
  std::vector<Link> links;
  std::vector<BoundaryLink> boundary;
  std::string source;  // an incoming hand-off from a stage on these ranks: that stage's module
};

// The llm's first stage takes its bridges in one action, except when two of its sources share
// ranks (colocated encoders): then each bridge gets its own action, so that no action holds
// two messages with one peer (a recorded action names its distinct peers).
struct StageLinks {
  const ModuleConfig* module = nullptr;
  std::vector<int> coords;  // tp, cp, pp, dp
  int pp = 0;
  std::vector<LinkGroup> in[2], out[2];  // [0] external, [1] internal; one action each
  bool inExt() const { return !in[0].empty(); }
  bool inInt() const { return !in[1].empty(); }
  bool outExt() const { return !out[0].empty(); }
  bool outInt() const { return !out[1].empty(); }
};

class RankBuilder {
 public:
  RankBuilder(const RunConfig& config, const Topology& topo, int rank)
      : config_(config), topo_(topo), rank_(rank) {
    const auto nodes = topo.stagesOf(rank);
    if (nodes.empty()) {
      throw std::invalid_argument("rank " + std::to_string(rank) +
                                  " belongs to no module (validate the config first)");
    }
    for (const StageNode* n : nodes) stages_.push_back(links(config.module(n->module)));
  }

  RankPlan build() {
    RankPlan rp;
    rp.rank = rank_;
    for (const StageLinks& s : stages_) {
      rp.stages.push_back({s.module->name, s.coords[0], s.coords[1], s.coords[2], s.coords[3]});
    }
    const StageLinks& front = stages_.front();
    rp.globalStage = topo_.globalStage(front.module->name, front.pp);
    int m = config_.microbatches;
    int w = topo_.warmup(front.module->name, front.pp, m);
    rp.warmup = w;
    rp.steady = m - w;
    if (config_.forwardOnly) {
      rp.cooldown = 0;
      for (int i = 0; i < m; ++i) {
        recvForward(i);
        forwardChain(i);
        sendForward(i);
      }
    } else {
      rp.cooldown = w;
      training(w, m);
    }
    rp.actions = std::move(actions_);
    return rp;
  }

 private:
  // schedule.md §5.3: warmup RF F SF; one RF; steady F SF_RB B SB_RF (last: SB); cooldown RB B SB.
  // F and B are the rank's chains (forwardChain / backwardChain); the communication actions
  // with other positions hold one action per stage, in stage order.
  void training(int w, int m) {
    for (int i = 0; i < w; ++i) {
      recvForward(i);
      forwardChain(i);
      sendForward(i);
    }
    int steady = m - w;
    if (steady > 0) recvForward(w);
    for (int i = 0; i < steady; ++i) {
      int fwd = i + w;
      forwardChain(fwd);
      sendForwardRecvBackward(fwd, i);
      backwardChain(i);
      if (i == steady - 1) {
        sendBackward(i);
      } else {
        sendBackwardRecvForward(i, fwd + 1);
      }
    }
    for (int i = steady; i < m; ++i) {
      recvBackward(i);
      backwardChain(i);
      sendBackward(i);
    }
    for (const StageLinks& s : stages_) push(s, ActionKind::DpReduce, -1);
    for (const StageLinks& s : stages_) push(s, ActionKind::OptimizerStep, -1);
  }

  // Forwards of the rank's stages in order.  Before the forward of a stage fed by stages on
  // these ranks, each feeding stage hands its output on and this stage takes it, pair by pair
  // (SF then RF per bridge): a TP peer that sends one bridge's activation over the wire then
  // joins that bridge's boundary broadcast before it sends the next.
  void forwardChain(int mb) {
    for (const StageLinks& s : stages_) {
      for (const LinkGroup& g : s.in[kInternal]) {
        sendForward(stage(g.source), g, mb, kInternal);
        recvForward(s, g, mb, kInternal);
      }
      push(s, ActionKind::Forward, mb);
    }
  }
  // Backwards in reverse order; after the backward of a stage fed by stages on these ranks,
  // the gradient goes back to each feeding stage, pair by pair (SB then RB per bridge).
  void backwardChain(int mb) {
    for (auto it = stages_.rbegin(); it != stages_.rend(); ++it) {
      push(*it, ActionKind::Backward, mb);
      for (const LinkGroup& g : it->in[kInternal]) {
        sendBackward(*it, g, mb, kInternal);
        recvBackward(stage(g.source), g, mb, kInternal);
      }
    }
  }

  const StageLinks& stage(const std::string& module) const {
    for (const StageLinks& s : stages_) {
      if (s.module->name == module) return s;
    }
    throw std::invalid_argument("rank " + std::to_string(rank_) + " holds no stage of " + module);
  }

  static constexpr int kExternal = 0, kInternal = 1;

  // P2P inside the module (the pp group), bridges at its first / last stage (the bridge's
  // leader group; peers in DP order, schedule.md §3.3).  A bridge rank on a boundary also
  // takes part in the boundary broadcast of what its leader received.
  StageLinks links(const ModuleConfig& module) {
    StageLinks s;
    s.module = &module;
    const Grid& grid = topo_.grid(module.name);
    s.coords = grid.coords(rank_);
    s.pp = s.coords[2];
    const std::vector<int> ppGroup = sorted(grid.groupOf({"pp"}, rank_));
    const std::string& name = module.name;
    const std::vector<int64_t> p2p = stageShape(config_, module);
    if (s.pp > 0) {
      auto c = s.coords;
      c[2] = s.pp - 1;
      s.in[kExternal].push_back(
          {{{grid.rankOf(c), p2pEdge(name, s.pp - 1), events::EdgeKind::P2P,
             events::BridgeRole::None, name, 0, 1, ppGroup, name + "/pp", p2p, p2p}},
           {},
           ""});
    } else {
      const auto bridges = topo_.bridgesInto(name);
      const bool split = sourcesShareRanks(bridges);
      for (const Bridge* b : bridges) {
        auto& groups = s.in[b->colocated ? kInternal : kExternal];
        if (split || groups.empty()) groups.emplace_back();
        if (b->colocated) groups.back().source = b->src;
        bridgeLinks(*b, module, /*source=*/false, b->recvPeersOf(rank_),
                    b->destLocalLeaderOf(rank_), b->destBoundaryOf(rank_), &groups.back());
      }
    }
    if (s.pp < module.pp - 1) {
      auto c = s.coords;
      c[2] = s.pp + 1;
      s.out[kExternal].push_back(
          {{{grid.rankOf(c), p2pEdge(name, s.pp), events::EdgeKind::P2P, events::BridgeRole::None,
             name, 0, 1, ppGroup, name + "/pp", p2p, p2p}},
           {},
           ""});
    } else {
      for (const Bridge* b : topo_.bridgesOutOf(name)) {
        auto& groups = s.out[b->colocated ? kInternal : kExternal];
        groups.emplace_back();
        bridgeLinks(*b, module, /*source=*/true, b->sendPeersOf(rank_), b->srcLocalLeaderOf(rank_),
                    b->srcBoundaryOf(rank_), &groups.back());
      }
    }
    return s;
  }

  // Whether two of these bridges come from stages on the same ranks.
  bool sourcesShareRanks(const std::vector<const Bridge*>& bridges) const {
    const Colocation& col = topo_.colocation();
    std::set<int> slots;
    for (const Bridge* b : bridges) {
      const int node = col.node(b->src, config_.module(b->src).pp - 1);
      if (!slots.insert(col.slotOf[static_cast<size_t>(node)]).second) return true;
    }
    return false;
  }

  // The shape of a bridge message from leader `sender` to leader `receiver`, in direction
  // `activation` (src -> dest) or not (dest -> src): the sender's part of its batch (its peers
  // in DP order split it, schedule.md §3.3), the encoder's patches, the dest's hidden size (the
  // encoder's projector maps to it).  Side-specific: on a colocated bridge one rank may lead
  // both sides.
  std::vector<int64_t> bridgeShape(const Bridge& b, bool activation, int sender,
                                   int receiver) const {
    const ModuleConfig& src = config_.module(b.src);
    const ModuleConfig& dest = config_.module(b.dest);
    const ModuleConfig& from = activation ? src : dest;
    const std::vector<int> peers = activation ? b.sendPeersOf(sender) : b.recvPeersOf(sender);
    const auto at = std::find(peers.begin(), peers.end(), receiver);
    const int part = static_cast<int>(at - peers.begin());
    return {src.patches,
            partOfBatch(stageShape(config_, from)[1], part, static_cast<int>(peers.size())),
            dest.hidden};
  }

  // `module`: this rank's stage on the bridge (its src when `source`, else its dest).
  void bridgeLinks(const Bridge& b, const ModuleConfig& module, bool source,
                   const std::vector<int>& peers, int leader, const std::vector<int>& boundaryList,
                   LinkGroup* group) {
    const std::string& peerModule = source ? b.dest : b.src;
    for (size_t j = 0; j < peers.size(); ++j) {
      const int srcLeader = source ? rank_ : peers[j], destLeader = source ? peers[j] : rank_;
      group->links.push_back({peers[j], b.name, events::EdgeKind::Bridge, roleOf(b), peerModule,
                              static_cast<int>(j), static_cast<int>(peers.size()), b.leaders(),
                              "bridge:" + b.name, bridgeShape(b, true, srcLeader, destLeader),
                              bridgeShape(b, false, destLeader, srcLeader)});
    }
    if (leader >= 0) {
      // The leader concatenates what it received: this module's batch, the bridge's width.
      const std::vector<int64_t> shape = {config_.module(b.src).patches,
                                          stageShape(config_, module)[1],
                                          config_.module(b.dest).hidden};
      group->boundary.push_back(
          {peerModule, leader, sorted(boundaryList), "boundary:" + b.name, shape});
    }
  }

  void addMessages(std::vector<Message>* out, const std::vector<Link>& links, Side side,
                   Direction dir, int mb) {
    for (const Link& l : links) {
      out->push_back({side, dir, l.peer, mb, l.edge, l.kind, l.role, l.peerModule, l.part, l.parts,
                      l.group, l.groupName,
                      dir == Direction::Activation ? l.activationShape : l.gradientShape,
                      events::toString(config_.dtype)});
    }
  }

  void addBroadcasts(std::vector<Broadcast>* out, const std::vector<BoundaryLink>& links,
                     Direction dir, int mb) {
    for (const BoundaryLink& l : links) {
      out->push_back({dir, mb, l.peerModule, l.root, l.ranks, l.groupName, l.shape,
                      events::toString(config_.dtype)});
    }
  }

  Action& push(const StageLinks& s, ActionKind kind, int mb, int gradMb = -1) {
    Action a;
    a.kind = kind;
    a.microbatch = mb;
    a.gradMicrobatch = gradMb;
    a.module = s.module->name;
    a.stage = s.pp;
    actions_.push_back(std::move(a));
    return actions_.back();
  }

  // Communication with other positions: one action per stage that has such a link.
  void recvForward(int mb) {
    for (const StageLinks& s : stages_) {
      if (s.inExt()) recvForward(s, mb, kExternal);
    }
  }
  void sendForward(int mb) {
    for (const StageLinks& s : stages_) {
      if (s.outExt()) sendForward(s, mb, kExternal);
    }
  }
  void recvBackward(int mb) {
    for (const StageLinks& s : stages_) {
      if (s.outExt()) recvBackward(s, mb, kExternal);
    }
  }
  void sendBackward(int mb) {
    for (const StageLinks& s : stages_) {
      if (s.inExt()) sendBackward(s, mb, kExternal);
    }
  }
  // Both halves use the outgoing link: a no-op at the sink's last stage.
  void sendForwardRecvBackward(int actMb, int gradMb) {
    for (const StageLinks& s : stages_) {
      for (const LinkGroup& g : s.out[kExternal]) {
        Action& a = push(s, ActionKind::SendForwardRecvBackward, actMb, gradMb);
        addMessages(&a.messages, g.links, Side::Send, Direction::Activation, actMb);
        addMessages(&a.messages, g.links, Side::Recv, Direction::Gradient, gradMb);
        addBroadcasts(&a.broadcasts, g.boundary, Direction::Gradient, gradMb);
      }
    }
  }
  // Both halves use the incoming link: a no-op at a source's first stage.
  void sendBackwardRecvForward(int gradMb, int actMb) {
    for (const StageLinks& s : stages_) {
      for (const LinkGroup& g : s.in[kExternal]) {
        Action& a = push(s, ActionKind::SendBackwardRecvForward, actMb, gradMb);
        addMessages(&a.messages, g.links, Side::Send, Direction::Gradient, gradMb);
        addMessages(&a.messages, g.links, Side::Recv, Direction::Activation, actMb);
        addBroadcasts(&a.broadcasts, g.boundary, Direction::Activation, actMb);
      }
    }
  }

  // One stage's communication over its external (k = kExternal) or internal links: one
  // action per link group.
  void recvForward(const StageLinks& s, int mb, int k) {
    for (const LinkGroup& g : s.in[k]) recvForward(s, g, mb, k);
  }
  void sendForward(const StageLinks& s, int mb, int k) {
    for (const LinkGroup& g : s.out[k]) sendForward(s, g, mb, k);
  }
  void recvBackward(const StageLinks& s, int mb, int k) {
    for (const LinkGroup& g : s.out[k]) recvBackward(s, g, mb, k);
  }
  void sendBackward(const StageLinks& s, int mb, int k) {
    for (const LinkGroup& g : s.in[k]) sendBackward(s, g, mb, k);
  }
  // The action of one link group.  For an internal pair, `g` is the consumer's incoming group;
  // the producer's side uses its own outgoing group (its only one: an encoder's bridge).
  void recvForward(const StageLinks& s, const LinkGroup& g, int mb, int k) {
    Action& a = push(s, ActionKind::RecvForward, mb);
    a.internal = k == kInternal;
    addMessages(&a.messages, g.links, Side::Recv, Direction::Activation, mb);
    addBroadcasts(&a.broadcasts, g.boundary, Direction::Activation, mb);
  }
  void sendForward(const StageLinks& s, const LinkGroup& g, int mb, int k) {
    const LinkGroup& out = k == kInternal ? s.out[k].at(0) : g;
    Action& a = push(s, ActionKind::SendForward, mb);
    a.internal = k == kInternal;
    addMessages(&a.messages, out.links, Side::Send, Direction::Activation, mb);
  }
  void recvBackward(const StageLinks& s, const LinkGroup& g, int mb, int k) {
    const LinkGroup& out = k == kInternal ? s.out[k].at(0) : g;
    Action& a = push(s, ActionKind::RecvBackward, mb);
    a.internal = k == kInternal;
    addMessages(&a.messages, out.links, Side::Recv, Direction::Gradient, mb);
    addBroadcasts(&a.broadcasts, out.boundary, Direction::Gradient, mb);
  }
  void sendBackward(const StageLinks& s, const LinkGroup& g, int mb, int k) {
    Action& a = push(s, ActionKind::SendBackward, mb);
    a.internal = k == kInternal;
    addMessages(&a.messages, g.links, Side::Send, Direction::Gradient, mb);
  }

  const RunConfig& config_;
  const Topology& topo_;
  int rank_;
  std::vector<StageLinks> stages_;
  std::vector<Action> actions_;
};

}  // namespace

const RankStage* RankPlan::stage(const std::string& module) const {
  for (const RankStage& s : stages) {
    if (s.module == module) return &s;
  }
  return nullptr;
}

std::string RankPlan::modules() const {
  std::string out;
  for (const RankStage& s : stages) out += (out.empty() ? "" : "+") + s.module;
  return out;
}

double Plan::expectedBubble() const {
  int p = totalStages, m = microbatches;
  if (m + p - 1 <= 0) return 0;
  return static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
}

Plan makePlan(const RunConfig& config, const Topology& topology) {
  Plan plan;
  plan.worldSize = config.worldSize;
  plan.totalStages = topology.totalStages();
  plan.microbatches = config.microbatches;
  plan.forwardOnly = config.forwardOnly;
  for (int r = 0; r < config.worldSize; ++r) {
    plan.ranks.push_back(RankBuilder(config, topology, r).build());
  }
  return plan;
}

std::vector<int64_t> stageShape(const RunConfig& config, const ModuleConfig& module) {
  if (module.isEncoder()) {
    return {module.patches, config.encoderMicroBatchSize(module), module.hidden};
  }
  int64_t sequence = module.textLen;
  for (const ModuleConfig* enc : config.encoders()) sequence += enc->patches;
  return {sequence, config.microBatchSize, module.hidden};
}

int64_t partOfBatch(int64_t batch, int part, int parts) {
  if (parts <= 1) return batch;
  return batch / parts + (part < batch % parts ? 1 : 0);
}

int messageTag(int iteration, const Message& m, bool payload) {
  // Edges that share a c10d group (bridges of colocated encoders into one llm, whose leader
  // groups are the same ranks) get different tags: 3 bits of the edge name's hash.
  uint32_t edge = 2166136261u;
  for (unsigned char ch : m.edge) edge = (edge ^ ch) * 16777619u;
  const int64_t message = (static_cast<int64_t>(iteration) * 4096 + m.microbatch) % (1 << 23);
  const int64_t named = message * 8 + static_cast<int64_t>(edge % 8);
  return static_cast<int>((named * 2 + static_cast<int>(m.direction)) * 2 + (payload ? 1 : 0));
}

events::ActionRecord toRecord(const RankPlan& rankPlan, size_t index, int iteration) {
  const Action& a = rankPlan.actions.at(index);
  events::ActionRecord r;
  r.rank = rankPlan.rank;
  r.iteration = iteration;
  r.seq = static_cast<int32_t>(index);
  r.kind = a.kind;
  r.microbatch = a.microbatch;
  r.module = a.module;
  r.stage = a.stage;
  std::vector<int32_t> peers;
  for (const Message& m : a.messages) {
    if (std::find(peers.begin(), peers.end(), m.peer) == peers.end()) peers.push_back(m.peer);
  }
  r.peers = peers;
  return r;
}

std::vector<events::ActionRecord> toRecords(const RankPlan& rankPlan, int iteration) {
  std::vector<events::ActionRecord> out;
  for (size_t i = 0; i < rankPlan.actions.size(); ++i)
    out.push_back(toRecord(rankPlan, i, iteration));
  return out;
}

std::string actionLabel(const Action& action) {
  std::string label = events::toString(action.kind);
  if (action.kind == ActionKind::Forward || action.kind == ActionKind::Backward) {
    label += std::to_string(action.microbatch);
  }
  return label;
}

std::string orderString(const RankPlan& rankPlan) {
  std::string out;
  for (const Action& a : rankPlan.actions) out += (out.empty() ? "" : " ") + actionLabel(a);
  return out;
}

}  // namespace stagescope::plan
