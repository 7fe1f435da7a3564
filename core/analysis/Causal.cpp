#include "core/analysis/Causal.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include "core/analysis/Pairing.h"

namespace stagescope::analysis {

using model::RunModel;
using model::TransferPair;

namespace {

// An action: (rank, index into run.actions[rank]).  32-bit index: a rank with 2^32 actions
// would need ~240 GB of ActionRecords before this point.
struct Ref {
  int32_t rank;
  uint32_t index;
};

// One dependency: action `of` cannot end before action `on` started.
struct Dep {
  Ref of, on;
};

// The dependencies of every action, in one block per rank (compressed rows): those of action
// i of rank r are deps[r][first[r][i] .. first[r][i + 1]).  At 10^7 actions a vector per
// action cost ~24 B each before any dependency, and a map node per collective group more.
struct DepTable {
  std::vector<std::vector<size_t>> first;
  std::vector<std::vector<Ref>> deps;

  DepTable(const RunModel& run, std::vector<Dep>&& all) {
    const size_t nRanks = run.actions.size();
    first.resize(nRanks);
    deps.resize(nRanks);
    // Counts, then their running sums (first[r][i] = end of block i), then each dependency
    // placed from its block's end down, which leaves first[r][i] at the block's start.
    for (size_t r = 0; r < nRanks; ++r) first[r].assign(run.actions[r].size() + 1, 0);
    for (const Dep& d : all) ++first[d.of.rank][d.of.index];
    for (size_t r = 0; r < nRanks; ++r) {
      auto& f = first[r];
      for (size_t i = 1; i + 1 < f.size(); ++i) f[i] += f[i - 1];
      f.back() = f.size() > 1 ? f[f.size() - 2] : 0;
      deps[r].resize(f.back());
    }
    for (const Dep& d : all) deps[d.of.rank][--first[d.of.rank][d.of.index]] = d.on;
    all = {};
  }
  std::span<const Ref> of(size_t r, size_t i) const {
    return {deps[r].data() + first[r][i], first[r][i + 1] - first[r][i]};
  }
};

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

// A group of ranks that run collectives together: a TP group (module, pp, cp, dp) for the
// actions other than DpReduce, a DP group (module, pp, cp, tp) for DpReduce.
using RankGroup = std::tuple<std::string, int32_t, int32_t, int32_t, bool>;
RankGroup groupOf(const events::RankInfo& info, bool dpReduce) {
  return {info.module, info.pp, info.cp, dpReduce ? info.tp : info.dp, dpReduce};
}

// The members of each collective of one rank group: its ranks' actions that belong to the
// group, matched by (iteration, kind, microbatch).  Each rank's actions are sorted by
// iteration, so the ranks are walked together one iteration at a time: the scratch list holds
// one iteration's members of one group (in cache), not the run's.
void addGroupDeps(const RunModel& run, const RankGroup& group, const std::set<int32_t>& ranks,
                  std::vector<Dep>& out) {
  struct Member {
    uint64_t key;  // kind << 32 | (microbatch as unsigned): equal for one collective
    Ref ref;
  };
  struct Cursor {
    int32_t rank;
    const std::vector<events::ActionRecord>* acts;
    size_t next = 0;
    events::Name module;  // the module of the last action placed, and whether it is in group
    bool known = false, inGroup = false;
  };
  const bool dpReduce = std::get<4>(group);
  std::vector<Cursor> cursors;
  for (int32_t r : ranks)
    if (r >= 0 && static_cast<size_t>(r) < run.actions.size())
      cursors.push_back({r, &run.actions[static_cast<size_t>(r)], 0, {}, false, false});
  std::vector<Member> members;
  for (;;) {
    int32_t iteration = INT32_MAX;  // the lowest iteration any rank has left
    bool any = false;
    for (const Cursor& c : cursors)
      if (c.next < c.acts->size()) {
        iteration = std::min(iteration, (*c.acts)[c.next].iteration);
        any = true;
      }
    if (!any) break;
    members.clear();
    for (Cursor& c : cursors) {
      for (; c.next < c.acts->size() && (*c.acts)[c.next].iteration == iteration; ++c.next) {
        const auto& a = (*c.acts)[c.next];
        if (a.kind == events::ActionKind::OptimizerStep ||
            (a.kind == events::ActionKind::DpReduce) != dpReduce)
          continue;
        // A colocated rank's actions group with the peers of their own module.
        if (!c.known || !(a.module == c.module)) {
          const events::RankInfo* info = placement(run, c.rank, a.module);
          c.inGroup = info && groupOf(*info, dpReduce) == group;
          c.module = a.module;
          c.known = true;
        }
        if (!c.inGroup) continue;
        const int32_t microbatch = dpReduce ? -1 : a.microbatch;
        members.push_back({static_cast<uint64_t>(a.kind) << 32 | static_cast<uint32_t>(microbatch),
                           {c.rank, static_cast<uint32_t>(c.next)}});
      }
    }
    std::sort(members.begin(), members.end(),
              [](const Member& x, const Member& y) { return x.key < y.key; });
    for (size_t g = 0; g < members.size();) {
      size_t end = g + 1;
      while (end < members.size() && members[end].key == members[g].key) ++end;
      for (size_t x = g; x < end; ++x)
        for (size_t y = g; y < end; ++y)
          if (members[y].ref.rank != members[x].ref.rank)
            out.push_back({members[x].ref, members[y].ref});
      g = end;
    }
  }
}

void addCollectiveDeps(const RunModel& run, std::vector<Dep>& out) {
  std::map<RankGroup, std::set<int32_t>> groups;
  for (const auto& info : run.ranks) {
    groups[groupOf(info, false)].insert(info.rank);
    groups[groupOf(info, true)].insert(info.rank);
  }
  for (const auto& [group, ranks] : groups)
    if (ranks.size() >= 2) addGroupDeps(run, group, ranks, out);
}

}  // namespace

CausalClock causalClock(const RunModel& run, const std::vector<TransferPair>& pairs) {
  size_t nRanks = run.actions.size();
  CausalClock c;
  c.start.resize(nRanks);
  c.end.resize(nRanks);
  for (size_t r = 0; r < nRanks; ++r) {
    c.start[r].assign(run.actions[r].size(), -1);
    c.end[r].assign(run.actions[r].size(), -1);
  }
  // A receive in action i waits for the send action that posted its message.
  std::vector<Dep> all;
  all.reserve(pairs.size());
  const ActionIndex actions(run);
  for (const auto& p : pairs) {
    if (p.send < 0 || p.recv < 0) continue;
    const auto& s = run.transfers[p.send];
    const auto& v = run.transfers[p.recv];
    int64_t si = actions.find(s.rank, s.iteration, s.actionSeq);
    int64_t vi = actions.find(v.rank, v.iteration, v.actionSeq);
    if (si < 0 || vi < 0) continue;
    all.push_back({{v.rank, static_cast<uint32_t>(vi)}, {s.rank, static_cast<uint32_t>(si)}});
  }
  addCollectiveDeps(run, all);
  const DepTable deps(run, std::move(all));
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
        for (const Ref& d : deps.of(r, i)) {
          int64_t ps = c.start[static_cast<size_t>(d.rank)][d.index];
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

CausalOrder::CausalOrder(const RunModel& run) : run_(run), actions_(run) {
  pairs_ = &pairsOf(run, ownPairs_);
  clock_ = causalClock(run, *pairs_);
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
  return key(rank, iteration, actions_.find(rank, iteration, seq), atEnd, atEnd ? 1 : 0);
}

CausalKey CausalOrder::ofTransfer(int64_t index) const {
  if (index < 0 || static_cast<size_t>(index) >= run_.transfers.size()) return {};
  const auto& t = run_.transfers[index];
  const bool recv = t.side == events::Side::Recv;
  return key(t.rank, t.iteration, actions_.find(t.rank, t.iteration, t.actionSeq), recv,
             recv ? 1 : 0);
}

int64_t CausalOrder::findKind(int rank, int iteration, events::ActionKind kind, int microbatch,
                              bool last, const std::string& module) const {
  if (rank < 0 || static_cast<size_t>(rank) >= run_.actions.size()) return -1;
  const auto& v = run_.actions[rank];
  int64_t found = -1;
  for (const auto& a : iterationRange(v, iteration)) {
    if (a.kind == kind && (microbatch < 0 || a.microbatch == microbatch) &&
        (module.empty() || a.module.empty() || a.module == module)) {
      found = &a - v.data();
      if (!last) break;
    }
  }
  return found;
}

std::string CausalOrder::lossModule(int rank) const {
  // The loss is the llm's (a colocated rank also holds encoders); "" matches any module.
  for (const auto& mi : run_.info.modules)
    if (mi.isLlm() && findRank(run_, rank, mi.name)) return mi.name;
  return "";
}

CausalKey CausalOrder::ofLoss(const events::LossRecord& l) const {
  // A per-iteration loss (microbatch -1) exists once the iteration's last Forward has ended.
  const bool iterationLoss = l.microbatch < 0;
  int64_t ai = findKind(l.rank, l.iteration, events::ActionKind::Forward, l.microbatch,
                        iterationLoss, lossModule(l.rank));
  return key(l.rank, l.iteration, ai, true, 1);
}

CausalKey CausalOrder::ofInput(const events::InputRecord& in) const {
  const int64_t ai = findKind(in.rank, in.iteration, events::ActionKind::Forward, in.microbatch,
                              false, in.module.str());
  return key(in.rank, in.iteration, ai, false, 0);
}

CausalKey CausalOrder::ofGradient(const events::GradientRecord& g) const {
  using events::ActionKind;
  using events::GradPhase;
  int64_t ai = -1;
  if (g.phase == GradPhase::ParamInitial) {
    // Held before the rank's first action of the iteration.
    CausalKey k;
    k.iteration = g.iteration;
    if (g.rank < 0 || static_cast<size_t>(g.rank) >= clock_.start.size()) return k;
    k.rank = g.rank;
    k.clock = -1;
    const auto* info = findRank(run_, g.rank, g.module.str());
    k.globalStage = info ? info->globalStage : INT_MAX;
    k.position = -1;
    return k;
  }
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
