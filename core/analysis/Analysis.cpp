#include "core/analysis/Analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <tuple>

namespace stagescope::analysis {

using events::ActionKind;
using events::Side;
using events::TransferRecord;
using model::RunModel;
using model::TransferPair;

const events::RankInfo* findRank(const RunModel& run, int rank) {
  if (rank >= 0 && static_cast<size_t>(rank) < run.ranks.size() && run.ranks[rank].rank == rank) {
    return &run.ranks[rank];
  }
  auto it = std::lower_bound(run.ranks.begin(), run.ranks.end(), rank,
                             [](const events::RankInfo& r, int v) { return r.rank < v; });
  if (it != run.ranks.end() && it->rank == rank) return &*it;
  for (const auto& r : run.ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

std::vector<TransferPair> pairTransfers(const std::vector<TransferRecord>& t) {
  std::vector<size_t> order(t.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto key = [&](size_t i) {
    const auto& r = t[i];
    return std::tie(r.edge, r.direction, r.iteration, r.microbatch, r.srcRank, r.dstRank);
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::vector<TransferPair> pairs;
  pairs.reserve(t.size() / 2 + 1);
  size_t i = 0;
  while (i < order.size()) {
    size_t j = i;
    while (j < order.size() && key(order[j]) == key(order[i])) ++j;
    std::vector<size_t> sends, recvs;
    for (size_t k = i; k < j; ++k) {
      (t[order[k]].side == Side::Send ? sends : recvs).push_back(order[k]);
    }
    size_t n = std::max(sends.size(), recvs.size());
    for (size_t k = 0; k < n; ++k) {
      TransferPair p;
      if (k < sends.size()) p.send = static_cast<int64_t>(sends[k]);
      if (k < recvs.size()) p.recv = static_cast<int64_t>(recvs[k]);
      if (p.send >= 0 && p.recv >= 0) {
        const auto& s = t[p.send];
        const auto& r = t[p.recv];
        p.shapeMatches = s.shape == r.shape && s.dtype == r.dtype;
        p.checksumMatches = !(s.checksum != 0 && r.checksum != 0 && s.checksum != r.checksum);
      }
      pairs.push_back(p);
    }
    i = j;
  }
  std::sort(pairs.begin(), pairs.end(), [](const TransferPair& a, const TransferPair& b) {
    int64_t x = a.send >= 0 ? a.send : a.recv;
    int64_t y = b.send >= 0 ? b.send : b.recv;
    return x < y;
  });
  return pairs;
}

const std::vector<TransferPair>& pairsOf(const RunModel& run, std::vector<TransferPair>& scratch) {
  if (!run.pairs.empty() || run.transfers.empty()) return run.pairs;
  scratch = pairTransfers(run.transfers);
  return scratch;
}

int64_t findAction(const RunModel& run, int rank, int iteration, int seq, bool planned) {
  const auto& lists = planned ? run.plan : run.actions;
  if (rank < 0 || static_cast<size_t>(rank) >= lists.size()) return -1;
  const auto& v = lists[rank];
  auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(iteration, seq),
                             [](const events::ActionRecord& a, const std::pair<int, int>& k) {
                               return std::make_pair(a.iteration, a.seq) < k;
                             });
  if (it == v.end() || it->iteration != iteration || it->seq != seq) return -1;
  return it - v.begin();
}

int sourceStage(const RunModel& run, const TransferRecord& t) {
  const auto* info = findRank(run, t.srcRank);
  return info ? info->globalStage : -1;
}

bool decodeValues(const std::vector<uint8_t>& bytes, const std::string& dtype,
                  std::vector<double>* out) {
  out->clear();
  auto half = [](uint16_t h) {
    uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    double v;
    if (exp == 0) {
      v = std::ldexp(static_cast<double>(mant), -24);
    } else if (exp == 31) {
      v = mant ? std::nan("") : INFINITY;
    } else {
      v = std::ldexp(static_cast<double>(mant | 0x400u), static_cast<int>(exp) - 25);
    }
    return sign ? -v : v;
  };
  if (dtype == "float32" || dtype == "float") {
    if (bytes.size() % 4) return false;
    out->resize(bytes.size() / 4);
    for (size_t i = 0; i < out->size(); ++i) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      (*out)[i] = f;
    }
  } else if (dtype == "float64" || dtype == "double") {
    if (bytes.size() % 8) return false;
    out->resize(bytes.size() / 8);
    std::memcpy(out->data(), bytes.data(), bytes.size());
  } else if (dtype == "bfloat16" || dtype == "float16" || dtype == "half") {
    if (bytes.size() % 2) return false;
    out->resize(bytes.size() / 2);
    for (size_t i = 0; i < out->size(); ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      if (dtype == "bfloat16") {
        uint32_t w = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &w, 4);
        (*out)[i] = f;
      } else {
        (*out)[i] = half(h);
      }
    }
  } else {
    return false;
  }
  return true;
}

std::vector<GatheredGradient> gatherGradients(const RunModel& run, events::GradPhase phase,
                                              bool values) {
  // Group record indices by (iteration, param).
  std::vector<size_t> idx;
  for (size_t i = 0; i < run.gradients.size(); ++i) {
    if (run.gradients[i].phase == phase) idx.push_back(i);
  }
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const auto& x = run.gradients[a];
    const auto& y = run.gradients[b];
    return std::tie(x.iteration, x.param, x.partitionDim, x.partitionOffset, x.dp, x.tp) <
           std::tie(y.iteration, y.param, y.partitionDim, y.partitionOffset, y.dp, y.tp);
  });
  std::vector<GatheredGradient> out;
  size_t i = 0;
  while (i < idx.size()) {
    const auto& first = run.gradients[idx[i]];
    size_t j = i;
    while (j < idx.size() && run.gradients[idx[j]].iteration == first.iteration &&
           run.gradients[idx[j]].param == first.param) {
      ++j;
    }
    GatheredGradient g;
    g.param = first.param;
    g.module = first.module;
    g.iteration = first.iteration;
    g.fullShape = first.fullShape.empty() ? first.shape : first.fullShape;
    // Distinct shards: first record of each (partitionDim, partitionOffset).
    std::vector<const events::GradientRecord*> shards;
    for (size_t k = i; k < j; ++k) {
      const auto& r = run.gradients[idx[k]];
      if (!shards.empty() && shards.back()->partitionDim == r.partitionDim &&
          shards.back()->partitionOffset == r.partitionOffset) {
        continue;
      }
      shards.push_back(&r);
    }
    g.shards = static_cast<int>(shards.size());
    double sumSq = 0;
    int64_t covered = 0;
    int dim = shards.front()->partitionDim;
    if (dim < 0) {
      g.layout = "replicated";
    } else {
      g.layout = "dim";
      g.layout.append(std::to_string(dim)).append(":");
    }
    for (const auto* s : shards) {
      sumSq += s->norm * s->norm;
      g.shardChecksums.push_back(s->checksum);
      if (s->hasStats && (s->stats.nanCount > 0 || s->stats.infCount > 0)) g.nonFinite = true;
      if (!std::isfinite(s->norm)) g.nonFinite = true;
      if (dim >= 0 && static_cast<size_t>(dim) < s->shape.size()) {
        covered += s->shape[dim];
        char range[64];
        std::snprintf(range, sizeof range, "[%lld,%lld)",
                      static_cast<long long>(s->partitionOffset),
                      static_cast<long long>(s->partitionOffset + s->shape[dim]));
        g.layout.append(range);
      }
    }
    g.norm = std::sqrt(sumSq);
    if (dim >= 0 && static_cast<size_t>(dim) < g.fullShape.size()) {
      g.complete = covered == g.fullShape[dim];
    } else if (dim >= 0) {
      g.complete = false;
    }
    if (values && g.complete) {
      int64_t total = 1;
      for (auto d : g.fullShape) total *= d;
      g.values.assign(static_cast<size_t>(std::max<int64_t>(total, 0)), 0.0);
      g.hasValues = true;
      std::vector<double> shardValues;
      for (const auto* s : shards) {
        if (s->payload.empty() || !decodeValues(s->payload, s->dtype, &shardValues)) {
          g.hasValues = false;
          break;
        }
        if (dim < 0) {
          if (shardValues.size() != g.values.size()) {
            g.hasValues = false;
            break;
          }
          g.values = shardValues;
          continue;
        }
        int64_t outer = 1, inner = 1;
        for (int d = 0; d < dim; ++d) outer *= g.fullShape[d];
        for (size_t d = dim + 1; d < g.fullShape.size(); ++d) inner *= g.fullShape[d];
        int64_t extent = s->shape[dim];
        if (static_cast<int64_t>(shardValues.size()) != outer * extent * inner) {
          g.hasValues = false;
          break;
        }
        for (int64_t o = 0; o < outer; ++o) {
          std::copy_n(shardValues.begin() + o * extent * inner, extent * inner,
                      g.values.begin() + (o * g.fullShape[dim] + s->partitionOffset) * inner);
        }
      }
      if (!g.hasValues) g.values.clear();
    }
    out.push_back(std::move(g));
    i = j;
  }
  return out;
}

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

namespace {
bool isComm(ActionKind k) {
  switch (k) {
    case ActionKind::RecvForward:
    case ActionKind::SendForward:
    case ActionKind::RecvBackward:
    case ActionKind::SendBackward:
    case ActionKind::SendForwardRecvBackward:
    case ActionKind::SendBackwardRecvForward:
      return true;
    default:
      return false;
  }
}
}  // namespace

TimeBreakdown timeBreakdown(const RunModel& run) {
  TimeBreakdown tb;
  tb.microbatches = run.info.microbatches;
  int maxStage = 0;
  for (const auto& r : run.ranks) {
    maxStage = std::max(maxStage, std::max(r.totalStages, r.globalStage + 1));
  }
  tb.stages = maxStage;
  if (tb.stages > 0 && tb.microbatches > 0) {
    tb.expectedBubble =
        static_cast<double>(tb.stages - 1) / static_cast<double>(tb.microbatches + tb.stages - 1);
  }
  int iterations = 0;
  for (const auto& list : run.actions) {
    if (!list.empty()) iterations = std::max(iterations, list.back().iteration + 1);
  }
  iterations = std::max(iterations, 0);
  constexpr int64_t kNone = INT64_MIN;
  std::vector<int64_t> itStart(iterations, INT64_MAX), itEnd(iterations, kNone);
  std::vector<int64_t> fbStart(iterations, INT64_MAX), fbEnd(iterations, kNone);
  auto offsetOf = [&](size_t r) {
    const auto* info = findRank(run, static_cast<int>(r));
    return info ? info->clockOffsetNs : 0;
  };
  for (size_t r = 0; r < run.actions.size(); ++r) {
    int64_t off = offsetOf(r);
    for (const auto& a : run.actions[r]) {
      if (a.iteration < 0 || a.iteration >= iterations) continue;
      itStart[a.iteration] = std::min(itStart[a.iteration], a.startNs - off);
      itEnd[a.iteration] = std::max(itEnd[a.iteration], a.endNs - off);
      if (a.kind == ActionKind::Forward || a.kind == ActionKind::Backward) {
        fbStart[a.iteration] = std::min(fbStart[a.iteration], a.startNs - off);
        fbEnd[a.iteration] = std::max(fbEnd[a.iteration], a.endNs - off);
      }
    }
  }
  for (int i = 0; i < iterations; ++i) {
    if (itEnd[i] != kNone) tb.stepMs.push_back(static_cast<double>(itEnd[i] - itStart[i]) / 1e6);
  }
  if (!tb.stepMs.empty()) {
    std::vector<double> s = tb.stepMs;
    std::sort(s.begin(), s.end());
    tb.medianStepMs =
        s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
    tb.meanStepMs = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
  }
  double bubbleSum = 0;
  int bubbleRanks = 0;
  for (size_t r = 0; r < run.actions.size(); ++r) {
    RankTime rt;
    rt.rank = static_cast<int>(r);
    if (const auto* info = findRank(run, rt.rank)) {
      rt.module = info->module;
      rt.tp = info->tp;
      rt.pp = info->pp;
      rt.dp = info->dp;
      rt.globalStage = info->globalStage;
    } else if (run.actions[r].empty()) {
      continue;
    }
    std::vector<int64_t> compute(iterations, 0);
    std::vector<char> seen(iterations, 0);
    int64_t busy = 0;
    for (const auto& a : run.actions[r]) {
      int64_t d = std::max<int64_t>(a.endNs - a.startNs, 0);
      double ms = static_cast<double>(d) / 1e6;
      switch (a.kind) {
        case ActionKind::Forward:
          rt.forwardMs += ms;
          break;
        case ActionKind::Backward:
          rt.backwardMs += ms;
          break;
        default:
          if (isComm(a.kind)) {
            rt.commMs += ms;
          } else {
            rt.otherMs += ms;
          }
      }
      busy += d;
      if (a.iteration >= 0 && a.iteration < iterations) {
        seen[a.iteration] = 1;
        if (a.kind == ActionKind::Forward || a.kind == ActionKind::Backward) {
          compute[a.iteration] += d;
        }
      }
    }
    int64_t span = 0;
    double bub = 0;
    int n = 0;
    for (int i = 0; i < iterations; ++i) {
      if (!seen[i] || itEnd[i] == kNone) continue;
      span += itEnd[i] - itStart[i];
      if (fbEnd[i] != kNone && fbEnd[i] > fbStart[i]) {
        double window = static_cast<double>(fbEnd[i] - fbStart[i]);
        bub += std::clamp(1.0 - static_cast<double>(compute[i]) / window, 0.0, 1.0);
        ++n;
      }
    }
    rt.spanMs = static_cast<double>(span) / 1e6;
    rt.idleMs = std::max(0.0, static_cast<double>(span - busy) / 1e6);
    rt.bubble = n ? bub / n : 0;
    if (n) {
      bubbleSum += rt.bubble;
      ++bubbleRanks;
    }
    tb.ranks.push_back(std::move(rt));
  }
  tb.measuredBubble = bubbleRanks ? bubbleSum / bubbleRanks : 0;
  return tb;
}

std::string formatChecksum(uint64_t checksum) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(checksum));
  return buf;
}

std::string formatShape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

double relativeDifference(double a, double b) {
  if (a == b) return 0;
  if (std::isnan(a) || std::isnan(b)) return INFINITY;
  double m = std::max(std::fabs(a), std::fabs(b));
  return m == 0 ? 0 : std::fabs(a - b) / m;
}

}  // namespace stagescope::analysis
