#include "ui/ReplayOrder.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>

#include "core/analysis/Pairing.h"

namespace stagescope::ui {

std::vector<PairActions> pairActions(const model::RunModel& model) {
  std::vector<PairActions> out(model.pairs.size());
  const analysis::ActionIndex actions(model);
  for (size_t i = 0; i < model.pairs.size(); ++i) {
    const auto& p = model.pairs[i];
    if (p.send >= 0) {
      const auto& t = model.transfers[p.send];
      out[i].sendRank = t.rank;
      out[i].sendAction = static_cast<int32_t>(actions.find(t.rank, t.iteration, t.actionSeq));
    }
    if (p.recv >= 0) {
      const auto& t = model.transfers[p.recv];
      out[i].recvRank = t.rank;
      out[i].recvAction = static_cast<int32_t>(actions.find(t.rank, t.iteration, t.actionSeq));
    }
  }
  return out;
}

namespace {

// A pair that constrains the order: both sides' actions known, on two ranks.
bool counted(const PairActions& p) {
  return p.sendAction >= 0 && p.recvAction >= 0 && p.sendRank != p.recvRank;
}

// For every end step of a receive action: how many send-begins it still waits for, and for
// every send-begin the receive-ends it releases.
// The receive-ends a send-begin releases are in one block per rank: those of action a of
// rank r are releases[r][firstRelease[r][a] .. firstRelease[r][a + 1]) (a vector per action
// cost ~24 B each at 10^7 actions before any message).
struct Dependencies {
  struct Waiter {
    int32_t rank, action;
  };
  std::vector<std::vector<int32_t>> pending;
  std::vector<std::vector<size_t>> firstRelease;
  std::vector<std::vector<Waiter>> releases;
  size_t total = 0;  // steps: two per action

  Dependencies(const model::RunModel& model, const std::vector<PairActions>& pairs);
};

Dependencies::Dependencies(const model::RunModel& model, const std::vector<PairActions>& pairs) {
  const int world = static_cast<int>(model.actions.size());
  pending.resize(world);
  firstRelease.resize(world);
  releases.resize(world);
  for (int r = 0; r < world; ++r) {
    pending[r].assign(model.actions[r].size(), 0);
    firstRelease[r].assign(model.actions[r].size() + 1, 0);
    total += 2 * model.actions[r].size();
  }
  if (world > INT16_MAX || total > static_cast<size_t>(INT32_MAX))
    throw std::length_error("replay order: " + std::to_string(world) + " ranks and " +
                            std::to_string(total / 2) +
                            " actions, expected at most 32767 ranks and 2^30 actions");
  for (const auto& p : pairs) {
    if (!counted(p)) continue;
    ++pending[p.recvRank][p.recvAction];
    ++firstRelease[p.sendRank][p.sendAction + 1];
  }
  for (int r = 0; r < world; ++r) {
    auto& f = firstRelease[r];
    for (size_t a = 1; a < f.size(); ++a) f[a] += f[a - 1];
    releases[r].resize(f.back());
  }
  std::vector<std::vector<size_t>> fill(world);
  for (int r = 0; r < world; ++r)
    fill[r].assign(firstRelease[r].begin(), firstRelease[r].end() - 1);
  for (const auto& p : pairs) {
    if (counted(p))
      releases[p.sendRank][fill[p.sendRank][p.sendAction]++] = {p.recvRank, p.recvAction};
  }
}

// The topological merge of the ranks' steps: the ready rank with the earliest next step goes
// first.
class CausalMerge {
 public:
  CausalMerge(const model::RunModel& model, Dependencies& deps)
      : model_(model),
        deps_(deps),
        world_(static_cast<int>(model.actions.size())),
        next_(world_, 0),
        queued_(world_, 0) {
    for (int r = 0; r < world_; ++r) push(r);
  }

  // Appends the steps in causal order; returns the constraints dropped to make progress.
  size_t run(std::vector<ReplayStep>& steps, std::vector<std::vector<int32_t>>& positions) {
    size_t broken = 0;
    steps.reserve(deps_.total);
    positions.resize(world_);
    for (int r = 0; r < world_; ++r) positions[r].assign(2 * model_.actions[r].size(), -1);
    while (steps.size() < deps_.total) {
      int r = popReady();
      if (r < 0) {
        r = breakCycle();
        if (r < 0) break;
        ++broken;
      }
      size_t k = next_[r];
      int32_t action = static_cast<int32_t>(k / 2);
      bool end = k & 1;
      positions[r][k] = static_cast<int32_t>(steps.size());
      steps.push_back({action, static_cast<int16_t>(r), end});
      ++next_[r];
      if (!end) release(r, action);
      push(r);
    }
    return broken;
  }

 private:
  // The time of rank r's next step (next_: 2*action + end).
  int64_t stepTime(int r) const {
    size_t k = next_[r];
    const auto& a = model_.actions[r][k / 2];
    return (k & 1) ? a.endNs : a.startNs;
  }
  bool readyRank(int r) const {
    size_t k = next_[r];
    if (k >= 2 * model_.actions[r].size()) return false;
    return !(k & 1) || deps_.pending[r][k / 2] == 0;
  }
  void push(int r) {
    if (!queued_[r] && readyRank(r)) {
      heap_.emplace(stepTime(r), r, next_[r]);
      queued_[r] = 1;
    }
  }
  // The ready rank with the earliest next step; -1 when none is ready.
  int popReady() {
    if (heap_.empty()) return -1;
    int r = std::get<1>(heap_.top());
    heap_.pop();
    queued_[r] = 0;
    return r;
  }
  // Inconsistent data (a cycle): releases the earliest blocked receive end; -1 when every
  // rank is done.
  int breakCycle() {
    int r = -1;
    int64_t best = INT64_MAX;
    for (int q = 0; q < world_; ++q) {
      if (next_[q] < 2 * model_.actions[q].size() && stepTime(q) < best) {
        best = stepTime(q);
        r = q;
      }
    }
    if (r >= 0) deps_.pending[r][next_[r] / 2] = 0;
    return r;
  }
  // The begin of a send action: the receive ends waiting only for it become ready.
  void release(int r, int32_t action) {
    for (size_t x = deps_.firstRelease[r][action]; x < deps_.firstRelease[r][action + 1]; ++x) {
      const Dependencies::Waiter& w = deps_.releases[r][x];
      if (--deps_.pending[w.rank][w.action] == 0) push(w.rank);
    }
  }

  using Entry = std::tuple<int64_t, int, size_t>;  // (time, rank, step index when queued)
  const model::RunModel& model_;
  Dependencies& deps_;
  int world_;
  std::vector<size_t> next_;  // next step index on the rank: 2*action + end
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
  std::vector<char> queued_;
};

// Prefix counts for stored activations: [rank][k] forwards (backwards) among the first k
// actions.
void prefixCounts(const model::RunModel& model, std::vector<std::vector<int32_t>>& fwdCum,
                  std::vector<std::vector<int32_t>>& bwdCum) {
  const size_t world = model.actions.size();
  fwdCum.resize(world);
  bwdCum.resize(world);
  for (size_t r = 0; r < world; ++r) {
    const auto& acts = model.actions[r];
    fwdCum[r].assign(acts.size() + 1, 0);
    bwdCum[r].assign(acts.size() + 1, 0);
    for (size_t i = 0; i < acts.size(); ++i) {
      fwdCum[r][i + 1] = fwdCum[r][i] + (acts[i].kind == events::ActionKind::Forward);
      bwdCum[r][i + 1] = bwdCum[r][i] + (acts[i].kind == events::ActionKind::Backward);
    }
  }
}

// Navigation targets: the steps at which an iteration begins, and those at which a
// microbatch enters the pipeline (its forward begins on a first-stage module).
void navigationTargets(const model::RunModel& model, const std::vector<ReplayStep>& steps,
                       std::vector<int64_t>& iterStarts, std::vector<int64_t>& mbStarts) {
  int minStage = INT32_MAX;
  for (const auto& ri : model.ranks) minStage = std::min(minStage, ri.globalStage);
  std::vector<std::pair<int, int>> seenMb;
  int lastIter = -1;
  for (size_t s = 0; s < steps.size(); ++s) {
    const ReplayStep& st = steps[s];
    const auto& a = model.actions[st.rank][st.action];
    if (!st.end && a.iteration > lastIter) {
      lastIter = a.iteration;
      iterStarts.push_back(static_cast<int64_t>(s));
    }
    if (st.end || a.kind != events::ActionKind::Forward) continue;
    // The forward's own module (a colocated rank also runs later stages' forwards).
    const auto* ri = model.placementOf(a);
    if (!ri || ri->globalStage != minStage) continue;
    auto key = std::make_pair(a.iteration, a.microbatch);
    if (std::find(seenMb.begin(), seenMb.end(), key) != seenMb.end()) continue;
    seenMb.push_back(key);
    if (seenMb.size() > 64) seenMb.erase(seenMb.begin());
    mbStarts.push_back(static_cast<int64_t>(s));
  }
}

}  // namespace

ReplayOrder ReplayOrder::build(const model::RunModel& model,
                               const std::vector<PairActions>& pairs) {
  ReplayOrder o;
  Dependencies deps(model, pairs);
  o.broken_ = CausalMerge(model, deps).run(o.steps_, o.positions_);
  prefixCounts(model, o.fwdCum_, o.bwdCum_);
  navigationTargets(model, o.steps_, o.iterStarts_, o.mbStarts_);
  return o;
}

RankReplayState ReplayOrder::stateAt(int rank, int64_t step) const {
  RankReplayState s;
  if (rank < 0 || rank >= static_cast<int>(positions_.size())) return s;
  const auto& pos = positions_[rank];
  auto k = std::lower_bound(pos.begin(), pos.end(), step) - pos.begin();
  s.done = static_cast<int32_t>(k / 2);
  s.running = k & 1;
  return s;
}

int ReplayOrder::storedActivations(int rank, int64_t step) const {
  if (rank < 0 || rank >= static_cast<int>(positions_.size())) return 0;
  RankReplayState s = stateAt(rank, step);
  return fwdCum_[rank][s.done] - bwdCum_[rank][s.done];
}

namespace {
int64_t nextIn(const std::vector<int64_t>& v, int64_t step, int64_t fallback) {
  auto it = std::upper_bound(v.begin(), v.end(), step);
  return it == v.end() ? fallback : *it;
}
int64_t prevIn(const std::vector<int64_t>& v, int64_t step) {
  auto it = std::lower_bound(v.begin(), v.end(), step);
  return it == v.begin() ? 0 : *(it - 1);
}
}  // namespace

int64_t ReplayOrder::nextMicrobatch(int64_t step) const {
  return nextIn(mbStarts_, step, static_cast<int64_t>(steps_.size()));
}
int64_t ReplayOrder::prevMicrobatch(int64_t step) const {
  return prevIn(mbStarts_, step);
}
int64_t ReplayOrder::nextIteration(int64_t step) const {
  return nextIn(iterStarts_, step, static_cast<int64_t>(steps_.size()));
}
int64_t ReplayOrder::prevIteration(int64_t step) const {
  return prevIn(iterStarts_, step);
}

}  // namespace stagescope::ui
