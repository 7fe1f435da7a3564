#include "Fixture.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "core/analysis/Analysis.h"
#include "core/model/Pairing.h"

namespace stagescope::report::testing {

namespace fs = std::filesystem;

using namespace analysis;
using events::ActionKind;
using events::ActionRecord;
using events::Direction;
using events::GradPhase;
using events::Side;
using events::TransferRecord;

uint64_t fnv1a(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t hashOf(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x1234567;
  for (auto p : parts) h = mix(h ^ p);
  return h;
}
uint64_t hashStr(const std::string& s) {
  return fnv1a(s.data(), s.size());
}
double unit(uint64_t h) {
  return static_cast<double>(h >> 11) / 9007199254740992.0;
}  // [0,1)

struct Sim {
  std::vector<std::vector<ActionRecord>> lists;  // per rank, all iterations
};

}  // namespace

void repair(model::RunModel& run) {
  std::sort(run.transfers.begin(), run.transfers.end(),
            [](const TransferRecord& a, const TransferRecord& b) {
              return std::tie(a.iteration, a.microbatch, a.edge, a.direction, a.srcRank, a.dstRank,
                              a.side) < std::tie(b.iteration, b.microbatch, b.edge, b.direction,
                                                 b.srcRank, b.dstRank, b.side);
            });
  run.transferIds.resize(run.transfers.size());
  for (size_t i = 0; i < run.transferIds.size(); ++i) run.transferIds[i] = static_cast<int64_t>(i);
  run.pairs = model::pairTransfers(run.transfers);
}

model::RunModel killedAt(model::RunModel run, int iteration) {
  run.info.status = events::RunStatus::Killed;
  run.info.statusReason = "rank 1 was killed";
  auto late = [iteration](const auto& record) { return record.iteration >= iteration; };
  std::erase_if(run.transfers, late);
  std::erase_if(run.gradients, late);
  std::erase_if(run.losses, late);
  for (auto& list : run.actions) std::erase_if(list, late);
  repair(run);
  return run;
}

model::RunModel makeRun(const FixtureOptions& o) {
  model::RunModel run;
  const int TP = o.tp, PP = o.pp, DP = o.dp, M = o.microbatches;
  const int world = TP * PP * DP;
  auto rankOf = [&](int tp, int pp, int dp) { return tp + TP * (dp + DP * pp); };
  run.path = "fixture://seed" + std::to_string(o.seed);
  run.schemaVersion = 1;
  auto& info = run.info;
  info.runId = "fixture-s" + std::to_string(o.seed) + "-tp" + std::to_string(TP) + "pp" +
               std::to_string(PP) + "dp" + std::to_string(DP);
  info.configText =
      "[run]\nseed = " + std::to_string(o.seed) + "\niterations = " + std::to_string(o.iterations) +
      "\nmicrobatches = " + std::to_string(M) + "\nrecord = \"" + (o.payloads ? "full" : "stats") +
      "\"\n\n[llm]\ntp = " + std::to_string(TP) + "\npp = " + std::to_string(PP) +
      "\ndp = " + std::to_string(DP) + "\nlayers = " + std::to_string(o.layers) + "\n";
  char hash[24];
  std::snprintf(
      hash, sizeof hash, "%016llx",
      static_cast<unsigned long long>(fnv1a(info.configText.data(), info.configText.size())));
  info.configHash = hash;
  info.worldSize = world;
  info.iterations = o.iterations;
  info.microbatches = M;
  info.level = o.payloads ? events::RecordLevel::Full : events::RecordLevel::Stats;
  info.modules.push_back({"llm", "llm", TP, 1, PP, DP, 0, o.layers, {}});
  info.status = events::RunStatus::Completed;
  info.versionStagescope = "0.1.0";

  run.ranks.resize(world);
  for (int pp = 0; pp < PP; ++pp) {
    for (int dp = 0; dp < DP; ++dp) {
      for (int tp = 0; tp < TP; ++tp) {
        auto& r = run.ranks[rankOf(tp, pp, dp)];
        r.rank = rankOf(tp, pp, dp);
        r.module = "llm";
        r.tp = tp;
        r.pp = pp;
        r.dp = dp;
        r.globalStage = pp;
        r.totalStages = PP;
        r.warmup = std::min(PP - pp - 1, M);
        r.host = "localhost";
        r.device = "cpu";
        r.pid = 1000 + r.rank;
      }
    }
  }

  // ---- the plan: 1F1B with separate send/recv actions ---------------------------------------
  run.plan.resize(world);
  for (int r = 0; r < world; ++r) {
    const auto& ri = run.ranks[r];
    int s = ri.pp, w = ri.warmup;
    int prev = s > 0 ? rankOf(ri.tp, s - 1, ri.dp) : -1;
    int next = s < PP - 1 ? rankOf(ri.tp, s + 1, ri.dp) : -1;
    for (int it = 0; it < o.iterations; ++it) {
      int seq = 0;
      auto push = [&](ActionKind k, int mb, int peer) {
        ActionRecord a;
        a.rank = r;
        a.iteration = it;
        a.seq = seq++;
        a.kind = k;
        a.microbatch = mb;
        a.module = "llm";
        a.stage = s;
        if (peer >= 0) a.peers = {peer};
        run.plan[r].push_back(a);
      };
      auto fwd = [&](int mb) {
        if (prev >= 0) push(ActionKind::RecvForward, mb, prev);
        push(ActionKind::Forward, mb, -1);
        if (next >= 0) push(ActionKind::SendForward, mb, next);
      };
      auto bwd = [&](int mb) {
        if (next >= 0) push(ActionKind::RecvBackward, mb, next);
        push(ActionKind::Backward, mb, -1);
        if (prev >= 0) push(ActionKind::SendBackward, mb, prev);
      };
      for (int i = 0; i < w; ++i) fwd(i);
      for (int i = 0; i < M - w; ++i) {
        fwd(w + i);
        bwd(i);
      }
      for (int i = M - w; i < M; ++i) bwd(i);
      push(ActionKind::DpReduce, -1, -1);
      push(ActionKind::OptimizerStep, -1, -1);
    }
  }

  // ---- execute with times: a recv ends after the matching send started -----------------------
  run.actions = run.plan;
  // send start times: (iteration, mb, dir, srcRank) -> ns
  std::map<std::tuple<int, int, int, int>, int64_t> sendStart;
  std::vector<size_t> next(world, 0);
  std::vector<int64_t> clock(world, 1'000'000'000);
  size_t remaining = 0;
  for (auto& l : run.actions) remaining += l.size();
  while (remaining > 0) {
    bool progress = false;
    for (int r = 0; r < world; ++r) {
      auto& list = run.actions[r];
      while (next[r] < list.size()) {
        auto& a = list[next[r]];
        int64_t start = clock[r], end = start;
        if (a.kind == ActionKind::RecvForward || a.kind == ActionKind::RecvBackward) {
          int dir = a.kind == ActionKind::RecvForward ? 0 : 1;
          auto it = sendStart.find({a.iteration, a.microbatch, dir, a.peers[0]});
          if (it == sendStart.end()) break;
          end = std::max(start, it->second) + o.commNs;
        } else if (a.kind == ActionKind::SendForward || a.kind == ActionKind::SendBackward) {
          int dir = a.kind == ActionKind::SendForward ? 0 : 1;
          sendStart[{a.iteration, a.microbatch, dir, r}] = start;
          end = start + o.commNs;
        } else if (a.kind == ActionKind::Forward) {
          end = start + o.forwardNs;
        } else if (a.kind == ActionKind::Backward) {
          end = start + o.backwardNs;
        } else {
          end = start + o.commNs * 2;
        }
        a.startNs = start;
        a.endNs = end;
        clock[r] = end + 1000;
        ++next[r];
        --remaining;
        progress = true;
      }
    }
    if (!progress) break;  // cannot happen for this schedule
  }
  for (auto& l : run.plan) {
    for (auto& a : l) a.startNs = a.endNs = 0;
  }

  // ---- transfers ------------------------------------------------------------------------------
  const int perStage = std::max(1, o.layers / PP);
  std::map<std::tuple<int, int, int, int>, size_t> recvIndex;  // (rank, it, kind, mb) -> index
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < run.actions[r].size(); ++i) {
      const auto& a = run.actions[r][i];
      recvIndex[{r, a.iteration, static_cast<int>(a.kind), a.microbatch}] = i;
    }
  }
  for (int r = 0; r < world; ++r) {
    const auto& ri = run.ranks[r];
    for (const auto& a : run.actions[r]) {
      bool fwd = a.kind == ActionKind::SendForward;
      if (!fwd && a.kind != ActionKind::SendBackward) continue;
      int peer = a.peers[0];
      const auto& pi = run.ranks[peer];
      int lo = std::min(ri.pp, pi.pp);
      int boundary = (lo + 1) * perStage;  // layer index after the link
      Direction dir = fwd ? Direction::Activation : Direction::Gradient;
      uint64_t h = hashOf({o.seed, static_cast<uint64_t>(a.iteration),
                           static_cast<uint64_t>(a.microbatch), static_cast<uint64_t>(ri.dp),
                           static_cast<uint64_t>(boundary), static_cast<uint64_t>(dir)});
      TransferRecord t;
      t.srcRank = r;
      t.dstRank = peer;
      t.srcGroupRank = ri.pp;
      t.dstGroupRank = pi.pp;
      t.edge = "llm:pp" + std::to_string(lo) + "->pp" + std::to_string(lo + 1);
      t.direction = dir;
      t.iteration = a.iteration;
      t.microbatch = a.microbatch;
      t.shape = {2, 16, 64};
      t.dtype = "float32";
      t.bytes = 2 * 16 * 64 * 4;
      t.checksum = h;
      t.hasStats = true;
      double u = unit(h);
      t.stats.min = -3 - u;
      t.stats.max = 3 + u;
      t.stats.mean = (u - 0.5) * 0.01;
      t.stats.l2 = 40 + 10 * u;
      t.stats.numel = 2 * 16 * 64;
      // sender side
      t.rank = r;
      t.side = Side::Send;
      t.actionSeq = a.seq;
      t.startNs = a.startNs;
      t.endNs = a.endNs;
      run.transfers.push_back(t);
      // receiver side: find the matching recv action
      ActionKind rk = fwd ? ActionKind::RecvForward : ActionKind::RecvBackward;
      auto found = recvIndex.find({peer, a.iteration, static_cast<int>(rk), a.microbatch});
      if (found != recvIndex.end()) {
        const auto& b = run.actions[peer][found->second];
        TransferRecord v = t;
        v.rank = peer;
        v.side = Side::Recv;
        v.actionSeq = b.seq;
        v.startNs = b.startNs;
        v.endNs = b.endNs;
        run.transfers.push_back(v);
      }
    }
  }
  repair(run);

  // ---- gradients ------------------------------------------------------------------------------
  struct Param {
    std::string name;
    std::vector<int64_t> shape;
    int partitionDim;
    int layer;
  };
  std::vector<Param> params;
  for (int l = 0; l < o.layers; ++l) {
    std::string base = "llm.layers." + std::to_string(l);
    params.push_back({base + ".mlp.weight", {8, 4}, 0, l});
    params.push_back({base + ".norm.weight", {4}, -1, l});
  }
  auto fullValues = [&](const Param& p, int it) {
    int64_t n = 1;
    for (auto d : p.shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      uint64_t h =
          hashOf({o.seed, hashStr(p.name), static_cast<uint64_t>(it), static_cast<uint64_t>(i)});
      v[i] = static_cast<float>((unit(h) - 0.5) * 0.02 / (1 + it));
    }
    return v;
  };
  auto fill = [&](events::GradientRecord& g, const std::vector<float>& v) {
    double s2 = 0, mn = INFINITY, mx = -INFINITY, sum = 0;
    for (float x : v) {
      s2 += static_cast<double>(x) * x;
      mn = std::min(mn, static_cast<double>(x));
      mx = std::max(mx, static_cast<double>(x));
      sum += x;
    }
    g.norm = std::sqrt(s2);
    g.checksum = fnv1a(v.data(), v.size() * sizeof(float));
    g.hasStats = true;
    g.stats.min = mn;
    g.stats.max = mx;
    g.stats.mean = v.empty() ? 0 : sum / static_cast<double>(v.size());
    g.stats.l2 = g.norm;
    g.stats.numel = static_cast<int64_t>(v.size());
    g.dtype = "float32";
    if (o.payloads) {
      g.payload.resize(v.size() * sizeof(float));
      std::memcpy(g.payload.data(), v.data(), g.payload.size());
    }
  };
  for (int it = 0; it < o.iterations; ++it) {
    for (const auto& p : params) {
      auto full = fullValues(p, it);
      if (o.reference) {
        events::GradientRecord g;
        g.rank = -1;  // the single-process reference: RunModel::referenceGradients
        g.iteration = it;
        g.phase = GradPhase::Reference;
        g.param = p.name;
        g.module = "llm";
        g.shape = p.shape;
        g.fullShape = p.shape;
        fill(g, full);
        run.referenceGradients.push_back(g);
      }
      int stage = std::min(PP - 1, p.layer / perStage);
      for (int dp = 0; dp < DP; ++dp) {
        for (int tp = 0; tp < TP; ++tp) {
          events::GradientRecord g;
          g.rank = rankOf(tp, stage, dp);
          g.iteration = it;
          g.phase = GradPhase::Reduced;
          g.param = p.name;
          g.module = "llm";
          g.tp = tp;
          g.pp = stage;
          g.dp = dp;
          g.fullShape = p.shape;
          g.partitionDim = TP > 1 ? p.partitionDim : -1;
          if (g.partitionDim >= 0) {
            int64_t rows = p.shape[0] / TP;
            g.partitionOffset = rows * tp;
            g.shape = {rows, p.shape[1]};
            std::vector<float> shard(full.begin() + g.partitionOffset * p.shape[1],
                                     full.begin() + (g.partitionOffset + rows) * p.shape[1]);
            fill(g, shard);
          } else {
            g.shape = p.shape;
            fill(g, full);
          }
          run.gradients.push_back(g);
        }
      }
    }
  }
  std::sort(run.gradients.begin(), run.gradients.end(),
            [](const events::GradientRecord& a, const events::GradientRecord& b) {
              return std::tie(a.iteration, a.phase, a.param, a.tp, a.pp, a.dp, a.microbatch) <
                     std::tie(b.iteration, b.phase, b.param, b.tp, b.pp, b.dp, b.microbatch);
            });

  // ---- losses ---------------------------------------------------------------------------------
  for (int it = 0; it < o.iterations; ++it) {
    for (int mb = 0; mb < M; ++mb) {
      for (int dp = 0; dp < DP; ++dp) {
        for (int tp = 0; tp < TP; ++tp) {
          events::LossRecord l;
          l.rank = rankOf(tp, PP - 1, dp);
          l.iteration = it;
          l.microbatch = mb;
          l.dp = dp;
          l.loss = 2.5 - 0.05 * it +
                   0.1 * unit(hashOf({o.seed, static_cast<uint64_t>(it), static_cast<uint64_t>(mb),
                                      static_cast<uint64_t>(dp)}));
          run.losses.push_back(l);
        }
      }
    }
  }
  std::sort(run.losses.begin(), run.losses.end(),
            [](const events::LossRecord& a, const events::LossRecord& b) {
              return std::tie(a.iteration, a.microbatch, a.dp, a.rank) <
                     std::tie(b.iteration, b.microbatch, b.dp, b.rank);
            });

  run.minTimeNs = INT64_MAX;
  run.maxTimeNs = INT64_MIN;
  for (const auto& l : run.actions) {
    for (const auto& a : l) {
      run.minTimeNs = std::min(run.minTimeNs, a.startNs);
      run.maxTimeNs = std::max(run.maxTimeNs, a.endNs);
    }
  }
  return run;
}

// ---- helpers the check, compare and report tests share ----------------------------------

std::string tempPath(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("stagescope_report_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const analysis::Finding* firstOf(const analysis::CheckReport& r, const std::string& name) {
  const auto* c = r.find(name);
  return c && !c->findings.empty() ? &c->findings.front() : nullptr;
}

int64_t findTransfer(const model::RunModel& run, const std::string& edge, events::Direction dir,
                     int it, int mb, events::Side side) {
  for (size_t i = 0; i < run.transfers.size(); ++i) {
    const auto& t = run.transfers[i];
    if (t.edge == edge && t.direction == dir && t.iteration == it && t.microbatch == mb &&
        t.side == side) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

}  // namespace stagescope::report::testing
