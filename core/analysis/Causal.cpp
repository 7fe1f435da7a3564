#include "core/analysis/Causal.h"

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include "core/analysis/Pairing.h"

namespace stagescope::analysis {

using model::RunModel;
using model::TransferPair;

namespace {

using ActionRef = std::pair<int, int64_t>;  // (rank, index into run.actions[rank])
using Deps = std::vector<std::vector<std::vector<ActionRef>>>;

// Collectives are not recorded as messages, yet they order events across ranks: the TP
// all-reduces inside a stage's forward/backward and the boundary broadcast a bridge leader
// sends its TP peers happen in the action of the same (iteration, kind, microbatch) on every
// TP peer (same module, pp, dp, cp); the gradient all-reduce happens in DpReduce on every DP
// peer (same module, pp, tp, cp).  A collective ends on no member before every member has
// started it, so each member's action depends on the start of every other member's.  Without
// these links a bridge member's gradient would look concurrent with (and could be named before)
// the bridge message that fed it through its leader's broadcast.
// Where an action of `module` ran on `rank`: that module's row; the rank's first row for a
// rank-wide action (module "") or a module without a row.
const events::RankInfo* placement(const RunModel& run, int rank, const std::string& module) {
  const auto* info = module.empty() ? nullptr : findRank(run, rank, module);
  return info ? info : findRank(run, rank);
}

void addCollectiveDeps(const RunModel& run, Deps& deps) {
  using Key = std::tuple<std::string, int, int, int, int, int, int, int>;
  std::map<Key, std::vector<ActionRef>> groups;
  for (size_t r = 0; r < run.actions.size(); ++r) {
    for (size_t i = 0; i < run.actions[r].size(); ++i) {
      const auto& a = run.actions[r][i];
      if (a.kind == events::ActionKind::OptimizerStep) continue;
      // A colocated rank's actions group with the peers of their own module.
      const auto* info = placement(run, static_cast<int>(r), a.module);
      if (!info) continue;
      const bool dp = a.kind == events::ActionKind::DpReduce;
      Key key{info->module,
              info->pp,
              info->cp,
              dp ? -1 - info->tp : info->dp,
              a.iteration,
              static_cast<int>(a.kind),
              dp ? -1 : a.microbatch,
              dp ? 1 : 0};
      groups[key].emplace_back(static_cast<int>(r), static_cast<int64_t>(i));
    }
  }
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    for (const auto& [r, i] : members) {
      for (const auto& other : members) {
        if (other.first != r) deps[r][i].push_back(other);
      }
    }
  }
}

}  // namespace

CausalClock causalClock(const RunModel& run, const std::vector<TransferPair>& pairs) {
  size_t nRanks = run.actions.size();
  CausalClock c;
  c.start.resize(nRanks);
  c.end.resize(nRanks);
  // deps[r][i]: (rank, index) of the send actions a receive in action i waits for.
  std::vector<std::vector<std::vector<std::pair<int, int64_t>>>> deps(nRanks);
  for (size_t r = 0; r < nRanks; ++r) {
    c.start[r].assign(run.actions[r].size(), -1);
    c.end[r].assign(run.actions[r].size(), -1);
    deps[r].resize(run.actions[r].size());
  }
  for (const auto& p : pairs) {
    if (p.send < 0 || p.recv < 0) continue;
    const auto& s = run.transfers[p.send];
    const auto& v = run.transfers[p.recv];
    int64_t si = findAction(run, s.rank, s.iteration, s.actionSeq);
    int64_t vi = findAction(run, v.rank, v.iteration, v.actionSeq);
    if (si < 0 || vi < 0) continue;
    deps[v.rank][vi].emplace_back(s.rank, si);
  }
  addCollectiveDeps(run, deps);
  std::vector<size_t> next(nRanks, 0);
  size_t remaining = 0;
  for (size_t r = 0; r < nRanks; ++r) remaining += run.actions[r].size();
  while (remaining > 0) {
    bool progress = false;
    for (size_t r = 0; r < nRanks; ++r) {
      while (next[r] < run.actions[r].size()) {
        size_t i = next[r];
        if (c.start[r][i] < 0) c.start[r][i] = i == 0 ? 0 : c.end[r][i - 1] + 1;
        int64_t t = c.start[r][i];
        bool ready = true;
        for (auto [pr, pi] : deps[r][i]) {
          int64_t ps = c.start[pr][pi];
          if (ps < 0) {
            ready = false;
            break;
          }
          t = std::max(t, ps + 1);
        }
        if (!ready) break;
        c.end[r][i] = t + 1;
        ++next[r];
        --remaining;
        progress = true;
      }
    }
    if (!progress) {
      // A cycle (should not happen in a recorded run): release the least advanced rank.
      size_t best = nRanks;
      for (size_t r = 0; r < nRanks; ++r) {
        if (next[r] >= run.actions[r].size()) continue;
        if (best == nRanks || c.start[r][next[r]] < c.start[best][next[best]]) best = r;
      }
      if (best == nRanks) break;
      size_t i = next[best];
      c.end[best][i] = c.start[best][i] + 1;
      ++next[best];
      --remaining;
    }
  }
  return c;
}

CausalOrder::CausalOrder(const RunModel& run) : run_(run) {
  std::vector<TransferPair> scratch;
  pairs_ = pairsOf(run, scratch);
  clock_ = causalClock(run, pairs_);
  // The global stage of each action's module on its rank (a colocated rank holds several).
  stageOf_.resize(run.actions.size());
  for (size_t r = 0; r < run.actions.size(); ++r) {
    stageOf_[r].assign(run.actions[r].size(), INT_MAX);
    for (size_t i = 0; i < run.actions[r].size(); ++i) {
      if (const auto* info = placement(run, static_cast<int>(r), run.actions[r][i].module))
        stageOf_[r][i] = info->globalStage;
    }
  }
}

CausalKey CausalOrder::key(int rank, int iteration, int64_t index, bool atEnd, int sub) const {
  CausalKey k;
  k.iteration = iteration;
  if (rank < 0 || static_cast<size_t>(rank) >= clock_.start.size()) return k;
  k.rank = rank;
  if (index < 0) {
    // Known iteration and rank, unknown action: after that iteration's known events of the
    // same clock; the rank's first module's stage.
    const auto* info = findRank(run_, rank);
    k.globalStage = info ? info->globalStage : INT_MAX;
    return k;
  }
  k.globalStage = stageOf_[rank][index];
  k.clock = atEnd ? clock_.end[rank][index] : clock_.start[rank][index];
  k.position = index * 2 + sub;
  return k;
}

CausalKey CausalOrder::ofAction(int rank, int iteration, int seq, bool atEnd) const {
  return key(rank, iteration, findAction(run_, rank, iteration, seq), atEnd, atEnd ? 1 : 0);
}

CausalKey CausalOrder::ofTransfer(int64_t index) const {
  if (index < 0 || static_cast<size_t>(index) >= run_.transfers.size()) return {};
  const auto& t = run_.transfers[index];
  const bool recv = t.side == events::Side::Recv;
  return key(t.rank, t.iteration, findAction(run_, t.rank, t.iteration, t.actionSeq), recv,
             recv ? 1 : 0);
}

int64_t CausalOrder::findKind(int rank, int iteration, events::ActionKind kind, int microbatch,
                              bool last, const std::string& module) const {
  if (rank < 0 || static_cast<size_t>(rank) >= run_.actions.size()) return -1;
  const auto& v = run_.actions[rank];
  auto lo =
      std::lower_bound(v.begin(), v.end(), iteration,
                       [](const events::ActionRecord& a, int it) { return a.iteration < it; });
  int64_t found = -1;
  for (auto it = lo; it != v.end() && it->iteration == iteration; ++it) {
    if (it->kind == kind && (microbatch < 0 || it->microbatch == microbatch) &&
        (module.empty() || it->module.empty() || it->module == module)) {
      found = it - v.begin();
      if (!last) break;
    }
  }
  return found;
}

std::string CausalOrder::lossModule(int rank) const {
  // The loss is the llm's (a colocated rank also holds encoders); "" matches any module.
  for (const auto& mi : run_.info.modules)
    if (mi.kind == "llm" && findRank(run_, rank, mi.name)) return mi.name;
  return "";
}

CausalKey CausalOrder::ofLoss(const events::LossRecord& l) const {
  // A per-iteration loss (microbatch -1) exists once the iteration's last Forward has ended.
  const bool iterationLoss = l.microbatch < 0;
  int64_t ai = findKind(l.rank, l.iteration, events::ActionKind::Forward, l.microbatch,
                        iterationLoss, lossModule(l.rank));
  return key(l.rank, l.iteration, ai, true, 1);
}

CausalKey CausalOrder::ofGradient(const events::GradientRecord& g) const {
  using events::ActionKind;
  using events::GradPhase;
  int64_t ai = -1;
  if (g.phase == GradPhase::Accumulated) {
    ai = findKind(g.rank, g.iteration, ActionKind::Backward, g.microbatch, false, g.module);
  } else if (g.phase == GradPhase::ParamAfterStep) {
    ai = findKind(g.rank, g.iteration, ActionKind::OptimizerStep, -1, false, g.module);
  } else {
    ai = findKind(g.rank, g.iteration, ActionKind::DpReduce, -1, false, g.module);
    if (ai < 0) ai = findKind(g.rank, g.iteration, ActionKind::Backward, -1, true, g.module);
  }
  return key(g.rank, g.iteration, ai, true, 1);
}

}  // namespace stagescope::analysis
