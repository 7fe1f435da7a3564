// The programs the NCCL replay runs (NcclReplay.h): what each rank posted, in its order, built
// from a stagescope run's plan or a captured job's recorded operations.
#include "core/analysis/NcclReplay.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace stagescope::analysis {

using events::ActionKind;
using Kind = NcclOp::Kind;

size_t NcclProgram::opCount() const {
  size_t n = 0;
  for (const auto& r : ops) n += r.size();
  return n;
}

namespace {

// ---- the program of a stagescope run: its plan -------------------------------------------------

bool isSend(ActionKind k) {
  return k == ActionKind::SendForward || k == ActionKind::SendBackward;
}
bool isRecv(ActionKind k) {
  return k == ActionKind::RecvForward || k == ActionKind::RecvBackward;
}
bool isCombined(ActionKind k) {
  return k == ActionKind::SendForwardRecvBackward || k == ActionKind::SendBackwardRecvForward;
}

// The ranks that share `r`'s coordinates in `module` except `free` ("tp", "pp" or "dp"): the
// members of r's tp, pp or dp group of that module, ascending.
std::vector<int> gridGroup(const model::RunModel& run, int r, const std::string& module,
                           char free) {
  const events::RankInfo* me = run.rankInfo(r, module);
  std::vector<int> out;
  if (!me) return out;
  for (const auto& x : run.ranks) {
    if (x.module != module || x.cp != me->cp) continue;
    if (free != 't' && x.tp != me->tp) continue;
    if (free != 'p' && x.pp != me->pp) continue;
    if (free != 'd' && x.dp != me->dp) continue;
    out.push_back(x.rank);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The module at the other end of a message from `module` on rank `peer`.
std::string peerModule(const model::RunModel& run, int peer, const std::string& module) {
  if (run.rankInfo(peer, module)) return module;
  auto rows = run.modulesOf(peer);
  return rows.empty() ? std::string() : rows.front().module;
}

bool feeds(const model::RunModel& run, const std::string& from, const std::string& to) {
  for (const auto& m : run.info.modules) {
    if (m.name == from) {
      return std::find(m.downstream.begin(), m.downstream.end(), to) != m.downstream.end();
    }
  }
  return false;
}

// The c10d group of a message between rank r (in `module`) and `peer`: the pipeline group of a
// module both hold (a colocated rank's message to its peer in the llm is on the llm's), else the
// bridge between their modules.
std::string p2pGroup(const model::RunModel& run, int r, int peer, const std::string& module) {
  std::string other = peerModule(run, peer, module);
  if (other == module) return module + "/pp";
  for (const auto& row : run.modulesOf(r)) {
    if (run.rankInfo(peer, row.module)) return row.module + "/pp";
  }
  // Both ends must name one group: from the module that feeds the other, else (a file without
  // its modules table) in name order.
  if (feeds(run, module, other)) return "bridge:" + module + "->" + other;
  if (feeds(run, other, module)) return "bridge:" + other + "->" + module;
  return "bridge:" + std::min(module, other) + "->" + std::max(module, other);
}

const events::ModuleInfo* moduleInfo(const model::RunModel& run, const std::string& name) {
  for (const auto& m : run.info.modules)
    if (m.name == name) return &m;
  return nullptr;
}

// Whether an action exchanges with the next stage (activation out, gradient in) rather than the
// previous one (activation in, gradient out).
bool towardNext(ActionKind k) {
  return k == ActionKind::SendForward || k == ActionKind::RecvBackward ||
         k == ActionKind::SendForwardRecvBackward;
}

// The c10d group of the messages of action `a` of rank r (in module a.module, at stage a.stage)
// with `peer`, named the same from both ends: the module's pipeline group inside it; at its last
// stage toward the next the bridge to the module it feeds, at its first stage toward the previous
// the bridge from the module feeding it (the one the peer holds).  Both ends of a bridge message
// agree even when every rank holds both modules (colocation), where the peer's modules cannot
// tell.  A file without its modules table: p2pGroup's guess.
std::string p2pGroupOf(const model::RunModel& run, int r, int peer, const events::ActionRecord& a) {
  const events::ModuleInfo* m = moduleInfo(run, a.module);
  if (!m || a.stage < 0) return p2pGroup(run, r, peer, a.module);
  const bool next = towardNext(a.kind);
  if (next ? a.stage < m->pp - 1 : a.stage > 0) return a.module + "/pp";
  std::vector<std::string> across;  // the modules at the other end of the bridge
  if (next) {
    across = m->downstream;
  } else {
    for (const auto& u : run.info.modules)
      if (std::find(u.downstream.begin(), u.downstream.end(), a.module) != u.downstream.end())
        across.push_back(u.name);
  }
  if (across.empty()) return p2pGroup(run, r, peer, a.module);
  std::string other = across.front();
  for (const auto& o : across)
    if (run.rankInfo(peer, o)) {
      other = o;
      break;
    }
  return next ? "bridge:" + a.module + "->" + other : "bridge:" + other + "->" + a.module;
}

// Bytes of the messages one rank recorded for one op: (rank, iteration, action seq, side, peer).
using OpKey = std::tuple<int, int, int, int, int>;
std::map<OpKey, int64_t> opBytes(const model::RunModel& run) {
  std::map<OpKey, int64_t> out;
  for (const auto& t : run.transfers) {
    const bool send = t.side == events::Side::Send;
    out[{t.rank, t.iteration, t.actionSeq, send ? 0 : 1, send ? t.dstRank : t.srcRank}] += t.bytes;
  }
  return out;
}
int64_t bytesOf(const std::map<OpKey, int64_t>& index, const NcclOp& op) {
  auto it =
      index.find({op.rank, op.iteration, op.seq, op.kind == NcclOp::Kind::Send ? 0 : 1, op.peer});
  return it == index.end() ? -1 : it->second;
}

// ---- engineProgram's steps ----------------------------------------------------------------------

// Members of each bridge group: every rank that exchanges on it.
std::map<std::string, std::set<int>> bridgeMembers(const model::RunModel& run) {
  const int n = static_cast<int>(run.plan.size());
  std::map<std::string, std::set<int>> bridges;
  for (int r = 0; r < n; ++r) {
    for (const auto& a : run.plan[r]) {
      for (int peer : a.peers) {
        if (peer == r) continue;
        std::string g = p2pGroupOf(run, r, peer, a);
        if (g.rfind("bridge:", 0) == 0) bridges[g].insert({r, peer});
      }
    }
  }
  return bridges;
}

// What engineProgram's steps share: the program being built (an op list and a step list per rank
// of the plan), the bytes each rank recorded per op, each bridge group's members, and the id the
// next batch takes (counted across ranks).
struct EngineProgramBuild {
  const model::RunModel& run;
  const NcclReplayOptions& opts;
  const std::map<OpKey, int64_t> bytes;
  NcclProgram p{};
  std::map<std::string, std::set<int>> bridges{};
  int batch = 0;
};

// The members of group `g` of rank r's messages: every rank that exchanges on a bridge, else r's
// pipeline group of the module ("<module>/pp").
std::vector<int> groupMembers(EngineProgramBuild& b, int r, const std::string& g) {
  if (g.rfind("bridge:", 0) == 0) {
    const auto& s = b.bridges[g];
    return std::vector<int>(s.begin(), s.end());
  }
  return gridGroup(b.run, r, g.substr(0, g.size() - 3), 'p');  // "<module>/pp"
}

// Rank r's op list and step list in the program being built, with the indices of its sends that
// no step has waited for yet.
struct RankProgram {
  int r;
  std::vector<NcclOp>& ops;
  std::vector<NcclStep>& steps;
  std::vector<int> unwaitedSends;
};

void flushSends(RankProgram& rp) {  // Communicator::finishSends at the end of an iteration
  if (!rp.unwaitedSends.empty()) rp.steps.push_back({true, rp.unwaitedSends});
  rp.unwaitedSends.clear();
}

// An all_reduce of action `a` on rank r's group of `module` that leaves out `free` ("tp", "pp"
// or "dp"), posted and waited for at once.
void postCollective(const model::RunModel& run, RankProgram& rp, const events::ActionRecord& a,
                    const std::string& module, char free, const char* what) {
  std::vector<int> g = gridGroup(run, rp.r, module, free);
  if (g.size() < 2) return;  // a group of one rank has no backend (ProcessGroups.h)
  NcclOp op;
  op.kind = Kind::Collective;
  op.rank = rp.r;
  op.group = module + "/" + std::string(free == 't' ? "tp" : free == 'p' ? "pp" : "dp");
  op.members = g;
  op.op = "all_reduce";
  op.iteration = a.iteration;
  op.seq = a.seq;
  op.what = std::string(what) + " (" + events::toString(a.kind) + " mb " +
            std::to_string(a.microbatch) + ")";
  int i = static_cast<int>(rp.ops.size());
  rp.ops.push_back(op);
  rp.steps.push_back({false, {i}});
  rp.steps.push_back({true, {i}});
}

// The op of one side (0: the send, 1: the receive) of p2p action `a` of rank r with `peer`; in
// the current batch when `asBatch`.
NcclOp exchangeOp(EngineProgramBuild& b, int r, const events::ActionRecord& a, int side, int peer,
                  bool asBatch) {
  const bool sendsActivation =
      a.kind == ActionKind::SendForward || a.kind == ActionKind::SendForwardRecvBackward;
  const bool receivesActivation =
      a.kind == ActionKind::RecvForward || a.kind == ActionKind::SendBackwardRecvForward;
  NcclOp op;
  op.kind = side == 0 ? Kind::Send : Kind::Recv;
  op.rank = r;
  op.peer = peer;
  op.group = p2pGroupOf(b.run, r, peer, a);
  op.members = groupMembers(b, r, op.group);
  op.batch = asBatch ? b.batch : -1;
  op.iteration = a.iteration;
  op.seq = a.seq;
  op.bytes = bytesOf(b.bytes, op);
  const bool activation = side == 0 ? sendsActivation : receivesActivation;
  op.what =
      std::string(activation ? "the activation" : "the gradient") +
      (isCombined(a.kind) && side == 1 ? "" : " of microbatch " + std::to_string(a.microbatch)) +
      " (iteration " + std::to_string(a.iteration) + ", " + events::toString(a.kind) + ")";
  return op;
}

// The ops `posted` of one combined action, one batch per group (PyTorch coalesces per process
// group), in the order the groups first appear.
void batchPerGroup(EngineProgramBuild& b, RankProgram& rp, const std::vector<int>& posted) {
  std::vector<std::string> order;
  for (int i : posted) {
    if (std::find(order.begin(), order.end(), rp.ops[i].group) == order.end()) {
      order.push_back(rp.ops[i].group);
    }
  }
  for (const auto& g : order) {
    NcclStep st{false, {}};
    for (int i : posted) {
      if (rp.ops[i].group == g) {
        rp.ops[i].batch = b.batch;
        st.ops.push_back(i);
      }
    }
    rp.steps.push_back(st);
    ++b.batch;
  }
}

// The sends and receives of action `a` (nothing when it exchanges no message): one op per peer
// off the rank, each posted alone or (a combined action, engineCombinedAsBatch) in batches; the
// receives waited for at once, the sends at the end of the iteration.
void postExchange(EngineProgramBuild& b, RankProgram& rp, const events::ActionRecord& a) {
  const bool sends = isSend(a.kind) || isCombined(a.kind);
  const bool recvs = isRecv(a.kind) || isCombined(a.kind);
  if (!sends && !recvs) return;
  const bool asBatch = isCombined(a.kind) && b.opts.engineCombinedAsBatch;
  std::vector<int> posted, received;
  for (int side = 0; side < 2; ++side) {  // the plan posts sends before receives
    if ((side == 0 && !sends) || (side == 1 && !recvs)) continue;
    for (int peer : a.peers) {
      if (peer == rp.r) continue;  // a local hand-off never touches the wire
      int i = static_cast<int>(rp.ops.size());
      rp.ops.push_back(exchangeOp(b, rp.r, a, side, peer, asBatch));
      posted.push_back(i);
      (side == 0 ? rp.unwaitedSends : received).push_back(i);
      if (!asBatch) rp.steps.push_back({false, {i}});
    }
  }
  if (posted.empty()) return;
  if (asBatch) batchPerGroup(b, rp, posted);
  if (!received.empty()) rp.steps.push_back({true, received});
}

// Rank r's ops and steps, from its plan in order.
void engineRankProgram(EngineProgramBuild& b, int r) {
  RankProgram rp{r, b.p.ops[r], b.p.steps[r], {}};
  int iteration = -1;
  for (const auto& a : b.run.plan[r]) {
    if (a.iteration != iteration) flushSends(rp);
    iteration = a.iteration;
    if (a.kind == ActionKind::Forward || a.kind == ActionKind::Backward) {
      postCollective(b.run, rp, a, a.module, 't', "tensor-parallel all_reduce");
      continue;
    }
    if (a.kind == ActionKind::DpReduce) {
      if (!a.module.empty()) {
        postCollective(b.run, rp, a, a.module, 'd', "data-parallel gradient all_reduce");
      } else {
        for (const auto& row : b.run.modulesOf(r)) {
          postCollective(b.run, rp, a, row.module, 'd', "data-parallel gradient all_reduce");
        }
      }
      continue;
    }
    postExchange(b, rp, a);
  }
  flushSends(rp);
}

NcclProgram engineProgram(const model::RunModel& run, const NcclReplayOptions& opts) {
  EngineProgramBuild b{run, opts, opBytes(run)};
  NcclProgram& p = b.p;
  p.fromPlan = true;
  p.source = opts.engineCombinedAsBatch
                 ? "the run's plan (a combined send+receive action: one batch per group)"
                 : "the run's plan (combined actions: one op after another)";
  const int n = static_cast<int>(run.plan.size());
  p.ops.resize(n);
  p.steps.resize(n);
  b.bridges = bridgeMembers(run);
  for (int r = 0; r < n; ++r) engineRankProgram(b, r);
  if (!opts.engineCombinedAsBatch) {
    p.unknowns.push_back(
        "combined actions replayed as the engine posts them today (one op "
        "after another)");
  }
  if (!b.bridges.empty()) p.unknowns.push_back("boundary broadcasts of bridges not replayed");
  return std::move(b.p);
}

// ---- the program of a captured job: its recorded operations -----------------------------------

// What captureProgram's steps share: the program being built (an op list and a step list per
// rank), the bytes each rank recorded per op, the batch_isend_irecv call of each recorded op,
// each group name's member sets (from its collectives) and the groups whose members no record
// gives.
struct CaptureProgramBuild {
  const model::RunModel& run;
  const NcclReplayOptions& opts;
  const std::map<OpKey, int64_t> bytes;
  NcclProgram p{};
  // The batch_isend_irecv call of each recorded op: (rank, iteration, seq) -> batch.
  std::map<std::tuple<int, int, int>, const events::BatchMemberRecord*> recordedBatch{};
  int n = 0;  // ranks
  std::map<std::string, std::set<std::vector<int>>> groups{};
  std::set<std::string> unknownMembers{};
};

// One op a rank posted, with its clock's post and completion times (ns; <= 0: not recorded).
struct PostedItem {
  int iteration, seq;
  NcclOp op;
  int64_t startNs, endNs;
};

// The op of recorded p2p action `a` of rank r: its group's members from the group's collectives
// (the default group "world": every rank), or the recorded batch's.
NcclOp captureP2pOp(CaptureProgramBuild& b, int r, const events::ActionRecord& a) {
  NcclOp op;
  op.kind = isSend(a.kind) ? Kind::Send : Kind::Recv;
  op.rank = r;
  op.peer = a.peers[0];
  op.group = a.module;
  for (const auto& g : b.groups[op.group]) {
    if (std::binary_search(g.begin(), g.end(), r) &&
        std::binary_search(g.begin(), g.end(), op.peer)) {
      op.members = g;
      break;
    }
  }
  if (op.members.empty() && op.group == "world") {  // the default group: every rank
    for (int m = 0; m < b.n; ++m) op.members.push_back(m);
  }
  if (op.members.empty()) b.unknownMembers.insert(op.group);
  op.iteration = a.iteration;
  op.seq = a.seq;
  op.bytes = bytesOf(b.bytes, op);
  if (auto it = b.recordedBatch.find({r, a.iteration, a.seq}); it != b.recordedBatch.end()) {
    op.batch = it->second->batch;
    if (!it->second->groupRanks.empty()) {  // the group's members, as the backend knew them
      op.members.assign(it->second->groupRanks.begin(), it->second->groupRanks.end());
      std::sort(op.members.begin(), op.members.end());
      b.unknownMembers.erase(op.group);
    }
  }
  op.what = "message #" + std::to_string(a.microbatch) + " of group " + a.module + " (op #" +
            std::to_string(a.seq) + ", iteration " + std::to_string(a.iteration) + ")";
  return op;
}

// Every op rank r posted, in record order: its sends and receives to other ranks, then its
// collectives.
std::vector<PostedItem> capturedItems(CaptureProgramBuild& b, int r) {
  std::vector<PostedItem> items;
  if (r < static_cast<int>(b.run.actions.size())) {
    for (const auto& a : b.run.actions[r]) {
      if (!isSend(a.kind) && !isRecv(a.kind)) continue;
      if (a.peers.empty() || a.peers[0] == r) continue;
      NcclOp op = captureP2pOp(b, r, a);
      items.push_back({a.iteration, a.seq, op, a.startNs, a.endNs});
    }
  }
  for (const auto& c : b.run.collectives) {
    if (c.rank != r) continue;
    NcclOp op;
    op.kind = Kind::Collective;
    op.rank = r;
    op.group = c.group;
    op.members = c.groupRanks;
    std::sort(op.members.begin(), op.members.end());
    op.op = c.op;
    op.iteration = c.iteration;
    op.seq = c.seq;
    op.what = c.op + " #" + std::to_string(c.groupSeq) + " (op #" + std::to_string(c.seq) +
              ", iteration " + std::to_string(c.iteration) + ")";
    items.push_back({c.iteration, c.seq, op, c.startNs, c.endNs});
  }
  // Posting order: the post times of one rank's clock when every op has one (`seq` restarts
  // at stagescope_torch.step(), so an op posted before the first step shares seq 0 with the
  // first op after it), else (iteration, seq).
  std::stable_sort(items.begin(), items.end(), [](const PostedItem& a, const PostedItem& b) {
    return std::tie(a.iteration, a.seq) < std::tie(b.iteration, b.seq);
  });
  if (std::all_of(items.begin(), items.end(), [](const PostedItem& x) { return x.startNs > 0; })) {
    std::stable_sort(items.begin(), items.end(), [](const PostedItem& a, const PostedItem& b) {
      return a.startNs < b.startNs;
    });
  }
  return items;
}

// Rank r's steps from its ops in posting order: a wait for the earlier ops the job saw complete
// before each post, a recorded batch (or, when asked, a candidate one) as one step, a wait for
// the rest at the end.
void captureRankSteps(CaptureProgramBuild& b, int r, const std::vector<PostedItem>& items) {
  NcclProgram& p = b.p;
  auto& ops = p.ops[r];
  auto& steps = p.steps[r];
  std::vector<int> outstanding;
  int batchId = 0, lastBatchOp = -1;
  for (const auto& it : items) {
    // The job saw every earlier op complete before this post: it waited for it.
    std::vector<int> waited, still;
    for (int i : outstanding) {
      const PostedItem& prev = items[i];
      (prev.endNs > 0 && prev.endNs <= it.startNs ? waited : still).push_back(i);
    }
    if (!waited.empty()) steps.push_back({true, waited});
    outstanding = still;
    int i = static_cast<int>(ops.size());
    NcclOp op = it.op;
    // A candidate batch: consecutive p2p ops on one group, posted with no wait between.
    const bool joins = b.opts.captureCandidateBatches && !p.batchesRecorded &&
                       op.kind != Kind::Collective && lastBatchOp >= 0 && waited.empty() &&
                       ops[lastBatchOp].kind != Kind::Collective &&
                       ops[lastBatchOp].group == op.group && !steps.empty() && !steps.back().wait;
    // A recorded batch: the ops one batch_isend_irecv posted are one step.
    const bool sameCall = p.batchesRecorded && op.batch >= 0 && lastBatchOp >= 0 &&
                          ops[lastBatchOp].batch == op.batch && !steps.empty() &&
                          !steps.back().wait;
    if (sameCall) {
      ops.push_back(op);
      steps.back().ops.push_back(i);
    } else if (joins) {
      if (ops[lastBatchOp].batch < 0) ops[lastBatchOp].batch = batchId++;
      op.batch = ops[lastBatchOp].batch;
      ops.push_back(op);
      steps.back().ops.push_back(i);
    } else {
      ops.push_back(op);
      steps.push_back({false, {i}});
    }
    lastBatchOp = i;
    outstanding.push_back(i);
  }
  if (!outstanding.empty()) steps.push_back({true, outstanding});
}

// A candidate batch of one op is no batch (a recorded one is: one group call).
void dropSingleOpBatches(NcclProgram& p) {
  for (auto& ops : p.ops) {
    if (p.batchesRecorded) break;
    std::map<int, int> size;
    for (const auto& o : ops) {
      if (o.batch >= 0) ++size[o.batch];
    }
    for (auto& o : ops) {
      if (o.batch >= 0 && size[o.batch] < 2) o.batch = -1;
    }
  }
}

NcclProgram captureProgram(const model::RunModel& run, const NcclReplayOptions& opts) {
  CaptureProgramBuild b{run, opts, opBytes(run)};
  NcclProgram& p = b.p;
  p.source = "a captured job's recorded operations";
  p.batchesRecorded = run.batchesRecorded;
  for (const auto& m : run.batchMembers) b.recordedBatch[{m.rank, m.iteration, m.seq}] = &m;
  b.n = std::max<int>(run.info.worldSize, static_cast<int>(run.actions.size()));
  for (const auto& c : run.collectives) b.n = std::max(b.n, c.rank + 1);
  p.ops.resize(b.n);
  p.steps.resize(b.n);
  for (const auto& c : run.collectives) {
    std::vector<int> g = c.groupRanks;
    std::sort(g.begin(), g.end());
    if (!g.empty()) b.groups[c.group].insert(g);
  }
  for (int r = 0; r < b.n; ++r) captureRankSteps(b, r, capturedItems(b, r));
  dropSingleOpBatches(p);
  if (!p.batchesRecorded) {
    p.unknowns.push_back(opts.captureCandidateBatches
                             ? "batches not recorded: ops posted together taken as one batch"
                             : "batches not recorded: every op replayed as posted alone");
  }
  for (const auto& g : b.unknownMembers) {
    p.unknowns.push_back("members of group " + g + " not recorded (no collective on it)");
  }
  return std::move(b.p);
}

}  // namespace

NcclProgram ncclProgramOf(const model::RunModel& run, const NcclReplayOptions& opts) {
  bool planned =
      std::any_of(run.plan.begin(), run.plan.end(), [](const auto& r) { return !r.empty(); });
  return planned ? engineProgram(run, opts) : captureProgram(run, opts);
}

}  // namespace stagescope::analysis
