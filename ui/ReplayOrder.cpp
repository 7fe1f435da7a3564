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

ReplayOrder ReplayOrder::build(const model::RunModel& model,
                               const std::vector<PairActions>& pairs) {
  ReplayOrder o;
  const int world = static_cast<int>(model.actions.size());
  // For every end step of a receive action: how many send-begins it still waits for, and for
  // every send-begin the receive-ends it releases.
  // The receive-ends a send-begin releases are in one block per rank: those of action a of
  // rank r are releases[r][firstRelease[r][a] .. firstRelease[r][a + 1]) (a vector per action
  // cost ~24 B each at 10^7 actions before any message).
  std::vector<std::vector<int32_t>> pending(world);
  struct Waiter {
    int32_t rank, action;
  };
  std::vector<std::vector<size_t>> firstRelease(world);
  std::vector<std::vector<Waiter>> releases(world);
  size_t total = 0;
  for (int r = 0; r < world; ++r) {
    pending[r].assign(model.actions[r].size(), 0);
    firstRelease[r].assign(model.actions[r].size() + 1, 0);
    total += 2 * model.actions[r].size();
  }
  if (world > INT16_MAX || total > static_cast<size_t>(INT32_MAX))
    throw std::length_error("replay order: " + std::to_string(world) + " ranks and " +
                            std::to_string(total / 2) +
                            " actions, expected at most 32767 ranks and 2^30 actions");
  auto counted = [](const PairActions& p) {
    return p.sendAction >= 0 && p.recvAction >= 0 && p.sendRank != p.recvRank;
  };
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
  {
    std::vector<std::vector<size_t>> fill(world);
    for (int r = 0; r < world; ++r)
      fill[r].assign(firstRelease[r].begin(), firstRelease[r].end() - 1);
    for (const auto& p : pairs) {
      if (counted(p))
        releases[p.sendRank][fill[p.sendRank][p.sendAction]++] = {p.recvRank, p.recvAction};
    }
  }

  std::vector<size_t> next(world, 0);  // next step index on the rank: 2*action + end
  auto stepTime = [&](int r) {
    size_t k = next[r];
    const auto& a = model.actions[r][k / 2];
    return (k & 1) ? a.endNs : a.startNs;
  };
  auto readyRank = [&](int r) {
    size_t k = next[r];
    if (k >= 2 * model.actions[r].size()) return false;
    return !(k & 1) || pending[r][k / 2] == 0;
  };
  using Entry = std::tuple<int64_t, int, size_t>;  // (time, rank, step index when queued)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  std::vector<char> queued(world, 0);
  auto push = [&](int r) {
    if (!queued[r] && readyRank(r)) {
      heap.emplace(stepTime(r), r, next[r]);
      queued[r] = 1;
    }
  };
  for (int r = 0; r < world; ++r) push(r);
  o.steps_.reserve(total);
  o.positions_.resize(world);
  for (int r = 0; r < world; ++r) o.positions_[r].assign(2 * model.actions[r].size(), -1);

  while (o.steps_.size() < total) {
    int r = -1;
    if (!heap.empty()) {
      r = std::get<1>(heap.top());
      heap.pop();
      queued[r] = 0;
    } else {
      // Inconsistent data (a cycle): release the earliest blocked receive end.
      int64_t best = INT64_MAX;
      for (int q = 0; q < world; ++q) {
        if (next[q] < 2 * model.actions[q].size() && stepTime(q) < best) {
          best = stepTime(q);
          r = q;
        }
      }
      if (r < 0) break;
      pending[r][next[r] / 2] = 0;
      ++o.broken_;
    }
    size_t k = next[r];
    int32_t action = static_cast<int32_t>(k / 2);
    bool end = k & 1;
    o.positions_[r][k] = static_cast<int32_t>(o.steps_.size());
    o.steps_.push_back({action, static_cast<int16_t>(r), end});
    ++next[r];
    if (!end) {
      for (size_t x = firstRelease[r][action]; x < firstRelease[r][action + 1]; ++x) {
        const Waiter& w = releases[r][x];
        if (--pending[w.rank][w.action] == 0) push(w.rank);
      }
    }
    push(r);
  }

  // Prefix counts for stored activations.
  o.fwdCum_.resize(world);
  o.bwdCum_.resize(world);
  for (int r = 0; r < world; ++r) {
    const auto& acts = model.actions[r];
    o.fwdCum_[r].assign(acts.size() + 1, 0);
    o.bwdCum_[r].assign(acts.size() + 1, 0);
    for (size_t i = 0; i < acts.size(); ++i) {
      o.fwdCum_[r][i + 1] = o.fwdCum_[r][i] + (acts[i].kind == events::ActionKind::Forward);
      o.bwdCum_[r][i + 1] = o.bwdCum_[r][i] + (acts[i].kind == events::ActionKind::Backward);
    }
  }

  // Navigation targets.
  int minStage = INT32_MAX;
  for (const auto& ri : model.ranks) minStage = std::min(minStage, ri.globalStage);
  std::vector<std::pair<int, int>> seenMb;
  int lastIter = -1;
  for (size_t s = 0; s < o.steps_.size(); ++s) {
    const ReplayStep& st = o.steps_[s];
    const auto& a = model.actions[st.rank][st.action];
    if (!st.end && a.iteration > lastIter) {
      lastIter = a.iteration;
      o.iterStarts_.push_back(static_cast<int64_t>(s));
    }
    if (!st.end && a.kind == events::ActionKind::Forward) {
      // The forward's own module (a colocated rank also runs later stages' forwards).
      const auto* ri = model.placementOf(a);
      if (ri && ri->globalStage == minStage) {
        auto key = std::make_pair(a.iteration, a.microbatch);
        if (std::find(seenMb.begin(), seenMb.end(), key) == seenMb.end()) {
          seenMb.push_back(key);
          if (seenMb.size() > 64) seenMb.erase(seenMb.begin());
          o.mbStarts_.push_back(static_cast<int64_t>(s));
        }
      }
    }
  }
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
