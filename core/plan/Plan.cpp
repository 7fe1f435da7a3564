// Per-rank 1F1B action lists (reference §5.3) with the messages every communication posts.
#include "core/plan/Plan.h"

#include <algorithm>
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

class RankBuilder {
 public:
  RankBuilder(const RunConfig& config, const Topology& topo, int rank)
      : config_(config), topo_(topo), rank_(rank) {
    const ModuleConfig* m = config.moduleOfRank(rank);
    if (!m) {
      throw std::invalid_argument("rank " + std::to_string(rank) +
                                  " belongs to no module (validate the config first)");
    }
    module_ = m;
    const Grid& grid = topo.grid(m->name);
    coords_ = grid.coords(rank);
    pp_ = coords_[2];
    first_ = pp_ == 0 && topo.isSource(m->name);
    last_ = pp_ == m->pp - 1 && topo.isSink(m->name);
    collectLinks(grid);
  }

  RankPlan build() {
    RankPlan rp;
    rp.rank = rank_;
    rp.module = module_->name;
    rp.tp = coords_[0];
    rp.cp = coords_[1];
    rp.pp = coords_[2];
    rp.dp = coords_[3];
    rp.globalStage = topo_.globalStage(module_->name, pp_);
    int m = config_.microbatches;
    int w = topo_.warmup(module_->name, pp_, m);
    if (config_.forwardOnly) {
      rp.warmup = w;
      rp.steady = m - w;
      rp.cooldown = 0;
      for (int i = 0; i < m; ++i) {
        recvForward(i);
        compute(ActionKind::Forward, i);
        sendForward(i);
      }
    } else {
      rp.warmup = w;
      rp.steady = m - w;
      rp.cooldown = w;
      training(w, m);
    }
    rp.actions = std::move(actions_);
    return rp;
  }

 private:
  // Reference §5.3: warmup RF F SF; one RF; steady F SF_RB B SB_RF (last: SB); cooldown RB B SB.
  void training(int w, int m) {
    for (int i = 0; i < w; ++i) {
      recvForward(i);
      compute(ActionKind::Forward, i);
      sendForward(i);
    }
    int steady = m - w;
    if (steady > 0) recvForward(w);
    for (int i = 0; i < steady; ++i) {
      int fwd = i + w;
      compute(ActionKind::Forward, fwd);
      sendForwardRecvBackward(fwd, i);
      compute(ActionKind::Backward, i);
      if (i == steady - 1) {
        sendBackward(i);
      } else {
        sendBackwardRecvForward(i, fwd + 1);
      }
    }
    for (int i = steady; i < m; ++i) {
      recvBackward(i);
      compute(ActionKind::Backward, i);
      sendBackward(i);
    }
    compute(ActionKind::DpReduce, -1);
    compute(ActionKind::OptimizerStep, -1);
  }

  // P2P inside the module (the pp group), bridges at its first / last stage (the bridge's
  // leader group; peers in DP order, reference §3.3).  A bridge rank on a boundary also
  // takes part in the boundary broadcast of what its leader received.
  void collectLinks(const Grid& grid) {
    const std::vector<int> ppGroup = sorted(grid.groupOf({"pp"}, rank_));
    const std::string& name = module_->name;
    const std::vector<int64_t> p2p = stageShape(config_, *module_);
    if (pp_ > 0) {
      auto c = coords_;
      c[2] = pp_ - 1;
      in_.push_back({grid.rankOf(c), p2pEdge(name, pp_ - 1), events::EdgeKind::P2P,
                     events::BridgeRole::None, name, 0, 1, ppGroup, name + "/pp", p2p, p2p});
    } else {
      for (const Bridge* b : topo_.bridgesInto(name)) bridgeLinks(*b, b->src, &in_, &inBoundary_);
    }
    if (pp_ < module_->pp - 1) {
      auto c = coords_;
      c[2] = pp_ + 1;
      out_.push_back({grid.rankOf(c), p2pEdge(name, pp_), events::EdgeKind::P2P,
                      events::BridgeRole::None, name, 0, 1, ppGroup, name + "/pp", p2p, p2p});
    } else {
      for (const Bridge* b : topo_.bridgesOutOf(name)) {
        bridgeLinks(*b, b->dest, &out_, &outBoundary_);
      }
    }
  }

  // The shape of a bridge message sent by `sender` to `receiver` (leaders): the sender's
  // part of its batch (its peers in DP order split it, reference §3.3), the encoder's patches,
  // the receiving side's hidden size (the encoder's projector maps to it).
  std::vector<int64_t> bridgeShape(const Bridge& b, int sender, int receiver) const {
    const ModuleConfig& src = config_.module(b.src);
    const ModuleConfig& dest = config_.module(b.dest);
    const ModuleConfig& from = src.contains(sender) ? src : dest;
    const std::vector<int> peers = b.peersOf(sender);
    const auto at = std::find(peers.begin(), peers.end(), receiver);
    const int part = static_cast<int>(at - peers.begin());
    return {src.patches,
            partOfBatch(stageShape(config_, from)[1], part, static_cast<int>(peers.size())),
            dest.hidden};
  }

  void bridgeLinks(const Bridge& b, const std::string& peerModule, std::vector<Link>* links,
                   std::vector<BoundaryLink>* boundary) {
    const auto peers = b.peersOf(rank_);
    const bool source = config_.module(b.src).contains(rank_);
    for (size_t j = 0; j < peers.size(); ++j) {
      const int srcLeader = source ? rank_ : peers[j], destLeader = source ? peers[j] : rank_;
      links->push_back({peers[j], b.name, events::EdgeKind::Bridge, roleOf(b), peerModule,
                        static_cast<int>(j), static_cast<int>(peers.size()), sorted(b.leaders()),
                        "bridge:" + b.name, bridgeShape(b, srcLeader, destLeader),
                        bridgeShape(b, destLeader, srcLeader)});
    }
    const int leader = b.localLeaderOf(rank_);
    if (leader >= 0) {
      // The leader concatenates what it received: this module's batch, the bridge's width.
      const ModuleConfig& src = config_.module(b.src);
      std::vector<int64_t> shape = {src.patches, stageShape(config_, *module_)[1],
                                    config_.module(b.dest).hidden};
      boundary->push_back(
          {peerModule, leader, sorted(b.boundaryOf(rank_)), "boundary:" + b.name, shape});
    }
  }

  void addMessages(std::vector<Message>* out, const std::vector<Link>& links, Side side,
                   Direction dir, int mb) {
    for (const Link& l : links) {
      out->push_back({side, dir, l.peer, mb, l.edge, l.kind, l.role, l.peerModule, l.part, l.parts,
                      l.group, l.groupName,
                      dir == Direction::Activation ? l.activationShape : l.gradientShape,
                      config_.dtype});
    }
  }

  void addBroadcasts(std::vector<Broadcast>* out, const std::vector<BoundaryLink>& links,
                     Direction dir, int mb) {
    for (const BoundaryLink& l : links) {
      out->push_back({dir, mb, l.peerModule, l.root, l.ranks, l.groupName, l.shape, config_.dtype});
    }
  }

  Action& push(ActionKind kind, int mb, int gradMb = -1) {
    Action a;
    a.kind = kind;
    a.microbatch = mb;
    a.gradMicrobatch = gradMb;
    a.module = module_->name;
    a.stage = pp_;
    actions_.push_back(std::move(a));
    return actions_.back();
  }

  void compute(ActionKind kind, int mb) { push(kind, mb); }

  void recvForward(int mb) {
    if (first_) return;
    Action& a = push(ActionKind::RecvForward, mb);
    addMessages(&a.messages, in_, Side::Recv, Direction::Activation, mb);
    addBroadcasts(&a.broadcasts, inBoundary_, Direction::Activation, mb);
  }
  void sendForward(int mb) {
    if (last_) return;
    addMessages(&push(ActionKind::SendForward, mb).messages, out_, Side::Send,
                Direction::Activation, mb);
  }
  void recvBackward(int mb) {
    if (last_) return;
    Action& a = push(ActionKind::RecvBackward, mb);
    addMessages(&a.messages, out_, Side::Recv, Direction::Gradient, mb);
    addBroadcasts(&a.broadcasts, outBoundary_, Direction::Gradient, mb);
  }
  void sendBackward(int mb) {
    if (first_) return;
    addMessages(&push(ActionKind::SendBackward, mb).messages, in_, Side::Send, Direction::Gradient,
                mb);
  }
  // Both halves use the outgoing link: a no-op at the sink's last stage.
  void sendForwardRecvBackward(int actMb, int gradMb) {
    if (last_) return;
    Action& a = push(ActionKind::SendForwardRecvBackward, actMb, gradMb);
    addMessages(&a.messages, out_, Side::Send, Direction::Activation, actMb);
    addMessages(&a.messages, out_, Side::Recv, Direction::Gradient, gradMb);
    addBroadcasts(&a.broadcasts, outBoundary_, Direction::Gradient, gradMb);
  }
  // Both halves use the incoming link: a no-op at a source's first stage.
  void sendBackwardRecvForward(int gradMb, int actMb) {
    if (first_) return;
    Action& a = push(ActionKind::SendBackwardRecvForward, actMb, gradMb);
    addMessages(&a.messages, in_, Side::Send, Direction::Gradient, gradMb);
    addMessages(&a.messages, in_, Side::Recv, Direction::Activation, actMb);
    addBroadcasts(&a.broadcasts, inBoundary_, Direction::Activation, actMb);
  }

  const RunConfig& config_;
  const Topology& topo_;
  int rank_;
  const ModuleConfig* module_ = nullptr;
  std::vector<int> coords_;
  int pp_ = 0;
  bool first_ = false, last_ = false;
  std::vector<Link> in_, out_;
  std::vector<BoundaryLink> inBoundary_, outBoundary_;
  std::vector<Action> actions_;
};

}  // namespace

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
  if (module.kind == "encoder") {
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
  const int64_t message = (static_cast<int64_t>(iteration) * 4096 + m.microbatch) % (1 << 26);
  return static_cast<int>((message * 2 + static_cast<int>(m.direction)) * 2 + (payload ? 1 : 0));
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
  for (const Message& m : a.messages) {
    if (std::find(r.peers.begin(), r.peers.end(), m.peer) == r.peers.end()) {
      r.peers.push_back(m.peer);
    }
  }
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
