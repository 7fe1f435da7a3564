#include "ui/RunProblems.h"

#include "core/analysis/Causal.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace stagescope::ui {

const char* toString(RankFate fate) {
  switch (fate) {
    case RankFate::Completed:
      return "completed";
    case RankFate::Unfinished:
      return "unfinished";
    case RankFate::Hung:
      return "hung";
    case RankFate::Failed:
      return "failed";
    case RankFate::Killed:
      return "killed";
    case RankFate::Stopped:
      return "stopped";
    case RankFate::PeerLost:
      return "peer lost";
  }
  return "?";
}

namespace {

using events::ActionKind;

// How strongly a record explains a rank's end (the strongest wins).
int strength(RankFate f) {
  switch (f) {
    case RankFate::Killed:
    case RankFate::Failed:
      return 4;
    case RankFate::Hung:
      return 3;
    case RankFate::PeerLost:
      return 2;
    case RankFate::Stopped:
      return 1;
    default:
      return 0;
  }
}

bool fateOfRecord(const std::string& kind, RankFate* out) {
  if (kind == "timeout")
    *out = RankFate::Hung;
  else if (kind == "error" || kind == "rank_exited")
    *out = RankFate::Failed;
  else if (kind == "rank_killed")
    *out = RankFate::Killed;
  else if (kind == "rank_stopped")
    *out = RankFate::Stopped;
  else if (kind == "peer_lost")
    *out = RankFate::PeerLost;
  else
    return false;
  return true;
}

int32_t firstUnexecuted(const std::vector<events::ActionRecord>& plan,
                        const std::vector<events::ActionRecord>& done) {
  std::set<std::pair<int32_t, int32_t>> executed;
  for (const auto& a : done) executed.emplace(a.iteration, a.seq);
  for (size_t i = 0; i < plan.size(); ++i)
    if (!executed.count({plan[i].iteration, plan[i].seq})) return static_cast<int32_t>(i);
  return -1;
}

// The action on a rank that produced a record: (iteration, kind, microbatch) -> index.
class ActionLookup {
 public:
  explicit ActionLookup(const storage::RunModel& m) : model_(m) {
    for (size_t r = 0; r < m.actions.size(); ++r)
      for (size_t i = 0; i < m.actions[r].size(); ++i) {
        const auto& a = m.actions[r][i];
        index_[{static_cast<int>(r), a.iteration, static_cast<int>(a.kind), a.microbatch}] =
            static_cast<int32_t>(i);  // the last one wins (a microbatch's last forward)
      }
  }
  int32_t find(int rank, int iteration, ActionKind kind, int microbatch) const {
    auto it = index_.find({rank, iteration, static_cast<int>(kind), microbatch});
    return it == index_.end() ? -1 : it->second;
  }
  // The last forward of `iteration` on `rank` (for an iteration's mean loss).
  int32_t lastForward(int rank, int iteration) const {
    int32_t best = -1;
    if (rank < 0 || rank >= static_cast<int>(model_.actions.size())) return -1;
    const auto& acts = model_.actions[rank];
    for (size_t i = 0; i < acts.size(); ++i)
      if (acts[i].iteration == iteration && acts[i].kind == ActionKind::Forward)
        best = static_cast<int32_t>(i);
    return best;
  }

 private:
  const storage::RunModel& model_;
  std::map<std::tuple<int, int, int, int>, int32_t> index_;
};

bool nonFinite(bool hasStats, const events::TensorStats& s) {
  return hasStats && (s.nanCount > 0 || s.infCount > 0);
}

}  // namespace

std::vector<NonFinite> nonFiniteInCausalOrder(const storage::RunModel& m,
                                              const ReplayOrder& replay) {
  // The order is analysis::CausalOrder's (the one `check` names its first NaN/Inf by); the
  // action found here only tells the viewer where to navigate.
  const analysis::CausalOrder order(m);
  ActionLookup lookup(m);
  const int world = static_cast<int>(m.actions.size());
  struct Keyed {
    analysis::CausalKey key;
    NonFinite n;
  };
  std::vector<Keyed> out;
  for (size_t i = 0; i < m.transfers.size(); ++i) {
    const auto& t = m.transfers[i];
    if (!nonFinite(t.hasStats, t.stats)) continue;
    NonFinite n{NonFinite::Kind::Transfer, static_cast<int64_t>(i), t.rank, -1, -1};
    n.action = t.rank >= 0 && t.rank < world ? findAction(m, t.rank, t.iteration, t.actionSeq) : -1;
    out.push_back({order.ofTransfer(static_cast<int64_t>(i)), n});
  }
  for (size_t i = 0; i < m.gradients.size(); ++i) {
    const auto& g = m.gradients[i];
    if (!nonFinite(g.hasStats, g.stats)) continue;
    NonFinite n{NonFinite::Kind::Gradient, static_cast<int64_t>(i), g.rank, -1, -1};
    if (g.phase == events::GradPhase::Accumulated)
      n.action = lookup.find(g.rank, g.iteration, ActionKind::Backward, g.microbatch);
    else if (g.phase == events::GradPhase::Reduced)
      n.action = lookup.find(g.rank, g.iteration, ActionKind::DpReduce, -1);
    else if (g.phase == events::GradPhase::ParamAfterStep)
      n.action = lookup.find(g.rank, g.iteration, ActionKind::OptimizerStep, -1);
    out.push_back({order.ofGradient(g), n});
  }
  for (size_t i = 0; i < m.losses.size(); ++i) {
    const auto& l = m.losses[i];
    if (std::isfinite(l.loss)) continue;
    NonFinite n{NonFinite::Kind::Loss, static_cast<int64_t>(i), l.rank, -1, -1};
    n.action = l.microbatch >= 0
                   ? lookup.find(l.rank, l.iteration, ActionKind::Forward, l.microbatch)
                   : lookup.lastForward(l.rank, l.iteration);
    out.push_back({order.ofLoss(l), n});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Keyed& a, const Keyed& b) { return a.key < b.key; });
  std::vector<NonFinite> sorted;
  sorted.reserve(out.size());
  for (auto& k : out) {
    if (k.n.rank >= 0 && k.n.rank < world && k.n.action >= 0)
      k.n.causalPosition = replay.positionOf(k.n.rank, k.n.action, true);
    sorted.push_back(k.n);
  }
  return sorted;
}

RunProblems findProblems(const storage::RunModel& m, const ReplayOrder& replay) {
  RunProblems out;
  const int world = static_cast<int>(m.actions.size());
  out.ranks.resize(world);
  const bool runEnded = m.info.status != events::RunStatus::Running;
  for (int r = 0; r < world; ++r) {
    RankProblem& p = out.ranks[r];
    const auto* plan = r < static_cast<int>(m.plan.size()) ? &m.plan[r] : nullptr;
    p.stuckPlan = plan ? firstUnexecuted(*plan, m.actions[r]) : -1;
    const bool complete =
        plan && !plan->empty() ? p.stuckPlan < 0 : m.info.status == events::RunStatus::Completed;
    p.fate = complete ? RankFate::Completed : RankFate::Unfinished;
  }
  // The ranks' own records (and the launcher's record of how each process ended).
  for (const auto& d : m.diagnoses) {
    RankFate f;
    if (d.rank < 0 || d.rank >= world || !fateOfRecord(d.kind, &f)) continue;
    RankProblem& p = out.ranks[d.rank];
    if (strength(f) <= strength(p.fate) && p.fate != RankFate::Completed &&
        p.fate != RankFate::Unfinished)
      continue;
    p.fate = f;
    p.why = d.message.substr(0, d.message.find('\n'));
    if (d.kind == "timeout") p.waitsOnRank = d.waitsOnRank;
  }
  for (int r = 0; r < world; ++r) {
    RankProblem& p = out.ranks[r];
    if (p.fate == RankFate::Unfinished && m.info.status == events::RunStatus::Killed) {
      p.fate = RankFate::Stopped;
      p.why = "the run was interrupted";
    }
    if (p.fate == RankFate::Unfinished && runEnded && p.why.empty())
      p.why =
          "stopped before its plan ended, without a record of why (a signal such as SIGKILL "
          "leaves none)";
    for (const auto& d : m.diagnoses)
      if (d.rank == r && d.kind == "timeout" && p.waitsOnRank < 0) p.waitsOnRank = d.waitsOnRank;
    if (p.waitsOnRank >= 0 && p.waitsOnRank < world && p.fate != RankFate::Completed)
      out.waits.push_back({r, p.stuckPlan, p.waitsOnRank});
  }
  // The root of the wait-for graph: follow waits-on edges to a rank that waits on nobody, or
  // around a cycle (its lowest rank).
  std::map<int, int> waitsOn;
  for (const auto& w : out.waits) waitsOn.emplace(w.rank, w.waitsOn);
  int root = -1;
  for (const auto& w : out.waits) {
    std::vector<int> path;
    int at = w.rank;
    while (waitsOn.count(at) && std::find(path.begin(), path.end(), at) == path.end()) {
      path.push_back(at);
      at = waitsOn[at];
    }
    int candidate = at;
    if (waitsOn.count(at))  // a cycle: its lowest rank
      candidate = *std::min_element(std::find(path.begin(), path.end(), at), path.end());
    if (root < 0 || candidate < root) root = candidate;
  }
  if (root < 0) {
    for (int r = 0; r < world && root < 0; ++r)
      if (strength(out.ranks[r].fate) == 4) root = r;
    for (int r = 0; r < world && root < 0; ++r)
      if (out.ranks[r].fate != RankFate::Completed) root = r;
  }
  out.firstStuckRank = root;
  auto nonFinite = nonFiniteInCausalOrder(m, replay);
  out.nonFiniteRecords = nonFinite.size();
  if (!nonFinite.empty()) out.firstNonFinite = nonFinite.front();
  return out;
}

}  // namespace stagescope::ui
