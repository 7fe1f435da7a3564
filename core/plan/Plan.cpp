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
};

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

  void collectLinks(const Grid& grid) {
    if (pp_ > 0) {
      auto c = coords_;
      c[2] = pp_ - 1;
      in_.push_back({grid.rankOf(c), p2pEdge(module_->name, pp_ - 1), events::EdgeKind::P2P,
                     events::BridgeRole::None});
    } else {
      for (const Bridge* b : topo_.bridgesInto(module_->name)) {
        for (int peer : b->peersOf(rank_)) {
          in_.push_back({peer, b->name, events::EdgeKind::Bridge, roleOf(*b)});
        }
      }
    }
    if (pp_ < module_->pp - 1) {
      auto c = coords_;
      c[2] = pp_ + 1;
      out_.push_back({grid.rankOf(c), p2pEdge(module_->name, pp_), events::EdgeKind::P2P,
                      events::BridgeRole::None});
    } else {
      for (const Bridge* b : topo_.bridgesOutOf(module_->name)) {
        for (int peer : b->peersOf(rank_)) {
          out_.push_back({peer, b->name, events::EdgeKind::Bridge, roleOf(*b)});
        }
      }
    }
  }

  void addMessages(std::vector<Message>* out, const std::vector<Link>& links, Side side,
                   Direction dir, int mb) {
    for (const Link& l : links) out->push_back({side, dir, l.peer, mb, l.edge, l.kind, l.role});
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
    addMessages(&push(ActionKind::RecvForward, mb).messages, in_, Side::Recv, Direction::Activation,
                mb);
  }
  void sendForward(int mb) {
    if (last_) return;
    addMessages(&push(ActionKind::SendForward, mb).messages, out_, Side::Send,
                Direction::Activation, mb);
  }
  void recvBackward(int mb) {
    if (last_) return;
    addMessages(&push(ActionKind::RecvBackward, mb).messages, out_, Side::Recv, Direction::Gradient,
                mb);
  }
  void sendBackward(int mb) {
    if (first_) return;
    addMessages(&push(ActionKind::SendBackward, mb).messages, in_, Side::Send, Direction::Gradient,
                mb);
  }
  // Both halves use the outgoing link: a no-op at the sink's last stage.
  void sendForwardRecvBackward(int actMb, int gradMb) {
    if (last_) return;
    auto& msgs = push(ActionKind::SendForwardRecvBackward, actMb, gradMb).messages;
    addMessages(&msgs, out_, Side::Send, Direction::Activation, actMb);
    addMessages(&msgs, out_, Side::Recv, Direction::Gradient, gradMb);
  }
  // Both halves use the incoming link: a no-op at a source's first stage.
  void sendBackwardRecvForward(int gradMb, int actMb) {
    if (first_) return;
    auto& msgs = push(ActionKind::SendBackwardRecvForward, actMb, gradMb).messages;
    addMessages(&msgs, in_, Side::Send, Direction::Gradient, gradMb);
    addMessages(&msgs, in_, Side::Recv, Direction::Activation, actMb);
  }

  const RunConfig& config_;
  const Topology& topo_;
  int rank_;
  const ModuleConfig* module_ = nullptr;
  std::vector<int> coords_;
  int pp_ = 0;
  bool first_ = false, last_ = false;
  std::vector<Link> in_, out_;
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
