// Communicator facts of schedule.md §10 (grid 2-3, bridge topology 5-6, bridge payloads 7-9,
// communicator 10) over real multi-process Gloo groups: the test process hosts a TCPStore and
// forks one child per rank (tests/engine/MultiProcess.h); every child builds the engine's
// ProcessGroups and Communicator, moves real tensors, and reports what it received and what
// its recorder saw.  All assertions run in the parent, against values written down here from
// the reference (not recomputed with core/plan), so a wrong leader, order, axis or split fails.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/engine/Communicator.h"
#include "core/engine/ProcessGroups.h"
#include "core/engine/TensorParallel.h"
#include "core/events/Recorder.h"
#include "core/plan/Config.h"
#include "core/plan/Plan.h"
#include "core/plan/Topology.h"
#include "tests/engine/MultiProcess.h"

namespace stagescope {
namespace {

using engine::Communicator;
using engine::ProcessGroups;
using events::ActionKind;
using testing::RankOutcome;
using testing::Report;
using Tokens = std::map<std::string, std::vector<std::string>>;

constexpr auto kTimeout = std::chrono::milliseconds(20000);
constexpr int kSeq = 3;            // activations are [seq, batch, hidden], batch on axis 1
constexpr int kHidden = 4;         //
constexpr double kGarbage = 7777;  // what non-leader ranks hold: must never be delivered

// ---- configs ------------------------------------------------------------------------------

struct Mod {
  int tp = 1, pp = 1, dp = 1, offset = 0;
};

std::string moduleToml(const std::string& name, const std::string& kind, const Mod& m) {
  std::ostringstream s;
  s << "[[modules]]\nname = \"" << name << "\"\nkind = \"" << kind << "\"\ntp = " << m.tp
    << "\ncp = 1\npp = " << m.pp << "\ndp = " << m.dp << "\noffset = " << m.offset
    << "\nlayers = 4\n\n";
  return s.str();
}

// One encoder "enc" (optional) feeding the llm "llm"; gloo, cpu, 20 s timeout.
std::string configToml(const Mod* enc, const Mod& llm) {
  std::string t =
      "seed = 1\niterations = 1\nmicrobatches = 2\nmicro_batch_size = 4\ndevice = \"cpu\"\n"
      "backend = \"gloo\"\ntimeout_seconds = 20\n\n[record]\nlevel = \"stats\"\n\n";
  if (enc) t += moduleToml("enc", "encoder", *enc);
  return t + moduleToml("llm", "llm", llm);
}

// Connects a child to the parent's store and creates every group the engine uses.
struct ChildEnv {
  plan::RunConfig cfg;
  plan::Topology topo;
  int world;
  c10::intrusive_ptr<c10d::Store> store;
  std::unique_ptr<ProcessGroups> groups;
  ChildEnv(const std::string& toml, int rank, int worldSize, int port)
      : cfg(plan::parseConfig(toml, "comm_test.toml")), topo(cfg), world(worldSize) {
    if (cfg.worldSize != world) throw std::runtime_error("config world != test world");
    store = engine::connectStore("127.0.0.1", port, /*isServer=*/false, world, kTimeout);
    groups =
        std::make_unique<ProcessGroups>(store, rank, world, engine::BackendKind::Gloo, kTimeout);
    Communicator::createAllGroups(cfg, topo, *groups);
  }
  // The ranks leave together, their groups still alive: a rank that exited as soon as its own
  // groups existed could close its Gloo pairs while a peer was still completing the same
  // connect (rank 2: "Gloo connectFullMesh failed ... Connection closed by peer", once in CI).
  // Bounded by kTimeout; never throws.
  ~ChildEnv() {
    try {
      store->add("child-env/left", 1);
      const auto until = std::chrono::steady_clock::now() + kTimeout;
      while (store->add("child-env/left", 0) < world && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } catch (...) {
    }
  }
};

// ---- reports ------------------------------------------------------------------------------

void putTensor(Report& r, const std::string& key, const at::Tensor& t) {
  if (!t.defined()) {
    r.put(key + ".shape", std::vector<std::string>{"undefined"});
    return;
  }
  r.put(key + ".shape", std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
  at::Tensor d = t.detach().to(at::kDouble).contiguous();
  r.put(key + ".vals", std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel()));
}

class MemoryRecorder final : public events::Recorder {
 public:
  std::vector<events::TransferRecord> transfers;
  events::RecordLevel level() const override { return events::RecordLevel::Stats; }
  void run(events::RunInfo) override {}
  void rank(events::RankInfo) override {}
  void planned(events::ActionRecord) override {}
  void action(events::ActionRecord) override {}
  void transfer(events::TransferRecord t) override { transfers.push_back(std::move(t)); }
  void gradient(events::GradientRecord) override {}
  void loss(events::LossRecord) override {}
  void input(events::InputRecord) override {}
  void diagnosis(events::DiagnosisRecord) override {}
  void wait(events::WaitRecord) override {}
  void referenceLoss(events::LossRecord) override {}
  void referenceGradient(events::GradientRecord) override {}
  void flush() override {}
  void close() override {}
};

// "X<i> rank side src dst dir mb edgeKind role checksum bytes edge ndim shape..."
void putTransfers(Report& r, const MemoryRecorder& rec) {
  for (size_t i = 0; i < rec.transfers.size(); ++i) {
    const auto& t = rec.transfers[i];
    std::vector<std::string> tok = {std::to_string(t.rank),
                                    std::to_string(static_cast<int>(t.side)),
                                    std::to_string(t.srcRank),
                                    std::to_string(t.dstRank),
                                    std::to_string(static_cast<int>(t.direction)),
                                    std::to_string(t.microbatch),
                                    std::to_string(static_cast<int>(t.edgeKind)),
                                    std::to_string(static_cast<int>(t.role)),
                                    std::to_string(t.checksum),
                                    std::to_string(t.bytes),
                                    t.edge,
                                    std::to_string(t.shape.size())};
    for (int64_t d : t.shape) tok.push_back(std::to_string(d));
    r.put("X" + std::to_string(i), tok);
  }
}

struct Transfer {
  int rank, side, src, dst, dir, mb, edgeKind, role;
  std::string checksum;
  int64_t bytes;
  std::string edge;
  std::vector<int64_t> shape;
};

std::vector<Transfer> parseTransfers(const Tokens& rep) {
  std::vector<Transfer> out;
  for (const auto& [key, tok] : rep) {
    if (key.empty() || key[0] != 'X') continue;
    Transfer t;
    t.rank = std::stoi(tok.at(0));
    t.side = std::stoi(tok.at(1));
    t.src = std::stoi(tok.at(2));
    t.dst = std::stoi(tok.at(3));
    t.dir = std::stoi(tok.at(4));
    t.mb = std::stoi(tok.at(5));
    t.edgeKind = std::stoi(tok.at(6));
    t.role = std::stoi(tok.at(7));
    t.checksum = tok.at(8);
    t.bytes = std::stoll(tok.at(9));
    t.edge = tok.at(10);
    const int nd = std::stoi(tok.at(11));
    for (int i = 0; i < nd; ++i) t.shape.push_back(std::stoll(tok.at(12 + i)));
    out.push_back(t);
  }
  return out;
}

std::vector<Tokens> parsed(const std::vector<RankOutcome>& outs) {
  std::vector<Tokens> r;
  for (const auto& o : outs) r.push_back(Report::parse(o.report));
  return r;
}

void expectAllSucceeded(const std::vector<RankOutcome>& outs) {
  for (const auto& o : outs) {
    EXPECT_FALSE(o.timedOut) << "rank " << o.rank << " timed out:\n" << o.report;
    EXPECT_EQ(o.exitCode, 0) << "rank " << o.rank << " failed:\n" << o.report;
  }
}

// ---- 1. grid groups over real Gloo ---------------------------------------------------------

std::string gridBody(const std::string& toml, int rank, int world, int port) {
  ChildEnv env(toml, rank, world, port);
  const plan::Grid& grid = env.topo.grid("llm");
  Report r;
  std::vector<std::vector<std::string>> dimSets = {{"tp"}, {"pp"}, {"dp"}, {"tp", "pp"}};
  for (const auto& dims : dimSets) {
    std::string key;
    for (const auto& d : dims) key += d;
    auto g = env.groups->get(grid.groupOf(dims, rank), "llm/" + key);
    if (!g) {
      r.put(key, std::vector<std::string>{"null"});
      continue;
    }
    r.put(key + ".ranks", std::vector<int64_t>(g->ranks.begin(), g->ranks.end()));
    r.put(key + ".local", std::vector<int64_t>{g->localRank(rank)});
    at::Tensor t = at::full({2}, static_cast<double>(rank), at::kFloat);
    engine::allReduceSum(*g, t, kTimeout);
    r.put(key + ".sum", std::vector<double>{t[0].item<double>(), t[1].item<double>()});
  }
  if (grid.contains(rank)) r.put("ppcoord", std::vector<int64_t>{grid.coord(rank, "pp")});
  // A list without this rank never yields a group (reference get_pg -> None).
  r.put("foreign", std::vector<std::string>{env.groups->get({4, 5}, "probe") ? "group" : "null"});
  return r.text();
}

std::vector<int64_t> ints(const Tokens& t, const std::string& key) {
  auto it = t.find(key);
  return it == t.end() ? std::vector<int64_t>{} : testing::toInts(it->second);
}

TEST(CommGroups, World8Tp2Pp2Dp2GroupsAreTheReferenceEnumerationsAndReduceOverTheirMembers) {
  const Mod llm{2, 2, 2, 0};
  const std::string toml = configToml(nullptr, llm);
  auto outs = testing::runRanks(
      8, [&](int rank, int world, int port) { return gridBody(toml, rank, world, port); });
  expectAllSucceeded(outs);
  auto rep = parsed(outs);
  // §10.2: tp [[0,1],[2,3],[4,5],[6,7]]; pp [[0,2],[1,3],[4,6],[5,7]]; dp
  // [[0,4],[1,5],[2,6],[3,7]]; §1.5 table: tp+pp [[0,1,2,3],[4,5,6,7]].
  const std::map<std::string, std::vector<std::vector<int64_t>>> table = {
      {"tp", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
      {"pp", {{0, 2}, {1, 3}, {4, 6}, {5, 7}}},
      {"dp", {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
      {"tppp", {{0, 1, 2, 3}, {4, 5, 6, 7}}}};
  for (int rank = 0; rank < 8; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    for (const auto& [key, lists] : table) {
      std::vector<int64_t> want;
      for (const auto& l : lists) {
        if (std::find(l.begin(), l.end(), rank) != l.end()) want = l;
      }
      EXPECT_EQ(ints(rep[rank], key + ".ranks"), want) << key;
      const auto pos = std::find(want.begin(), want.end(), rank) - want.begin();
      EXPECT_EQ(ints(rep[rank], key + ".local"), std::vector<int64_t>{pos}) << key;
      const double sum = std::accumulate(want.begin(), want.end(), 0.0);
      EXPECT_EQ(testing::toDoubles(rep[rank][key + ".sum"]), (std::vector<double>{sum, sum}))
          << key;
    }
    // The pp-group rank equals the pp coordinate.
    EXPECT_EQ(ints(rep[rank], "pp.local"), ints(rep[rank], "ppcoord"));
    const bool in45 = rank == 4 || rank == 5;
    EXPECT_EQ(rep[rank]["foreign"], std::vector<std::string>{in45 ? "group" : "null"});
  }
}

TEST(CommGroups, World8Offset4GridGivesNonMembersNoGroup) {
  // §10.3: vision tp2 dp2 on 0-3, llm [2,1,2,1] at offset 4.
  const Mod enc{2, 1, 2, 0}, llm{2, 2, 1, 4};
  const std::string toml = configToml(&enc, llm);
  auto outs = testing::runRanks(
      8, [&](int rank, int world, int port) { return gridBody(toml, rank, world, port); });
  expectAllSucceeded(outs);
  auto rep = parsed(outs);
  const std::map<std::string, std::vector<std::vector<int64_t>>> table = {
      {"tp", {{4, 5}, {6, 7}}}, {"pp", {{4, 6}, {5, 7}}}, {"dp", {{4}, {5}, {6}, {7}}}};
  for (int rank = 0; rank < 8; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    if (rank < 4) {
      for (const char* key : {"tp", "pp", "dp", "tppp"}) {
        EXPECT_EQ(rep[rank][key], std::vector<std::string>{"null"}) << key;
        EXPECT_EQ(rep[rank].count(std::string(key) + ".ranks"), 0u) << key;
      }
      continue;
    }
    for (const auto& [key, lists] : table) {
      std::vector<int64_t> want;
      for (const auto& l : lists) {
        if (std::find(l.begin(), l.end(), rank) != l.end()) want = l;
      }
      EXPECT_EQ(ints(rep[rank], key + ".ranks"), want) << key;
      const double sum = std::accumulate(want.begin(), want.end(), 0.0);
      EXPECT_EQ(testing::toDoubles(rep[rank][key + ".sum"]), (std::vector<double>{sum, sum}))
          << key;
    }
  }
  EXPECT_EQ(rep[3]["tp"], std::vector<std::string>{"null"});  // the §10.3 fact, explicitly
}

// ---- 2. bridge payloads -------------------------------------------------------------------

// One encoder -> llm layout with the reference's expected boundary lists and leaders.
struct Scenario {
  Mod enc, llm;
  int world = 0;
  std::vector<int> srcBatch;                                // per encoder DP replica
  std::vector<std::vector<int>> srcBoundary, destBoundary;  // per DP replica
  std::vector<int> srcLeaders, destLeaders;
  bool p2p = false;  // also run intra-module P2P (2D payload) on modules with pp > 1
};

// The distinctive payload: sample, position and microbatch are all readable from the value.
double value(int sample, int s, int h, int mb) {
  return 100000.0 * mb + 1000.0 * sample + 10 * s + h;
}

at::Tensor samplesTensor(const std::vector<int>& samples, int mb, double sign, double shift) {
  std::vector<double> v;
  for (int s = 0; s < kSeq; ++s) {
    for (int sample : samples) {
      for (int h = 0; h < kHidden; ++h) v.push_back(sign * value(sample, s, h, mb) + shift);
    }
  }
  return at::tensor(v, at::kDouble)
      .reshape({kSeq, static_cast<int64_t>(samples.size()), kHidden})
      .to(at::kFloat);
}

std::vector<int> srcSamples(const Scenario& sc, int replica) {
  const int off = std::accumulate(sc.srcBatch.begin(), sc.srcBatch.begin() + replica, 0);
  std::vector<int> s(sc.srcBatch[replica]);
  std::iota(s.begin(), s.end(), off);
  return s;
}

// The plan's action of `kind` for this rank, its messages and broadcasts renumbered to `mb`
// (the mini schedules below use every kind on every layout, which a layout's own 1F1B plan
// need not contain: a combined op is assembled from the plan's two halves, in posting order).
plan::Action plannedAction(const plan::RankPlan& me, ActionKind kind, int mb, int gradMb) {
  if (kind == ActionKind::SendForwardRecvBackward || kind == ActionKind::SendBackwardRecvForward) {
    const bool sfrb = kind == ActionKind::SendForwardRecvBackward;
    plan::Action send = plannedAction(me, sfrb ? ActionKind::SendForward : ActionKind::SendBackward,
                                      sfrb ? mb : gradMb, -1);
    plan::Action recv = plannedAction(me, sfrb ? ActionKind::RecvBackward : ActionKind::RecvForward,
                                      sfrb ? gradMb : mb, -1);
    send.kind = kind;
    send.microbatch = mb;
    send.gradMicrobatch = gradMb;
    send.messages.insert(send.messages.end(), recv.messages.begin(), recv.messages.end());
    send.broadcasts = recv.broadcasts;
    return send;
  }
  for (const auto& a : me.actions) {
    if (a.kind != kind) continue;
    plan::Action out = a;
    out.microbatch = mb;
    // These scenarios send batches no config can express (uneven splits such as 5 -> 3 + 2,
    // a 2D payload): their messages carry no planned shape, so the receiver takes the shape
    // from the frame header (the plan-shaped path is PlanWireTest's and every real run's).
    for (auto& m : out.messages) {
      m.microbatch = mb;
      m.shape.clear();
    }
    for (auto& b : out.broadcasts) {
      b.microbatch = mb;
      b.shape.clear();
    }
    return out;
  }
  throw std::runtime_error("rank " + std::to_string(me.rank) + " has no " + events::toString(kind) +
                           " action in its plan");
}

// Runs a mini 1F1B across the bridge for two microbatches, using every communication kind:
//   encoder last stage: SF(0), SF_RB(act 1, grad 0), RB(1)
//   llm first stage:    RF(0), SB_RF(grad 0, act 1), SB(1)
// then, with sc.p2p, one 2D P2P exchange (microbatch 2) inside every module with pp = 2.
std::string bridgeBody(const Scenario& sc, int rank, int world, int port) {
  ChildEnv env(configToml(&sc.enc, sc.llm), rank, world, port);
  plan::Plan plan = plan::makePlan(env.cfg, env.topo);
  const plan::RankPlan& me = plan.ranks.at(rank);
  const plan::RankStage& st = me.stages.at(0);
  MemoryRecorder rec;
  Communicator comm(me, *env.groups, rec, at::Device(at::kCPU), nullptr);
  int seq = 0;
  auto run = [&](ActionKind kind, int mb, int gradMb, const at::Tensor* act,
                 const std::map<std::string, at::Tensor>* grads,
                 std::map<std::string, at::Tensor>* inputs, at::Tensor* gradOut) {
    const plan::Action a = plannedAction(me, kind, mb, gradMb);
    engine::CommIds ids;
    ids.iteration = 0;
    ids.actionSeq = seq++;
    ids.action = &a;
    comm.run(ids, act, grads, inputs, gradOut);
  };
  Report r;
  const auto& enc = env.cfg.module("enc");
  if (st.module == "enc" && st.pp == enc.pp - 1) {
    // Only the src leader (tp = T-1) holds the real activation; the others hold garbage.
    const bool leader = st.tp == enc.tp - 1;
    auto activation = [&](int mb) {
      at::Tensor t = samplesTensor(srcSamples(sc, st.dp), mb, 1, 0);
      return leader ? t : at::full_like(t, kGarbage);
    };
    at::Tensor a0 = activation(0), a1 = activation(1), g0, g1;
    run(ActionKind::SendForward, 0, -1, &a0, nullptr, nullptr, nullptr);
    run(ActionKind::SendForwardRecvBackward, 1, 0, &a1, nullptr, nullptr, &g0);
    run(ActionKind::RecvBackward, 1, -1, nullptr, nullptr, nullptr, &g1);
    putTensor(r, "grad0", g0);
    putTensor(r, "grad1", g1);
  }
  if (st.module == "llm" && st.pp == 0) {
    const bool leader = st.tp == 0;  // the dest leader; only its gradient may travel
    auto gradientOf = [&](const at::Tensor& x) {
      at::Tensor g = -x - 0.25;
      return std::map<std::string, at::Tensor>{{"enc", leader ? g : at::full_like(g, kGarbage)}};
    };
    std::map<std::string, at::Tensor> in0, in1;
    run(ActionKind::RecvForward, 0, -1, nullptr, nullptr, &in0, nullptr);
    std::vector<std::string> keys;
    for (const auto& kv : in0) keys.push_back(kv.first);
    r.put("inkeys", keys);
    auto gr0 = gradientOf(in0.at("enc"));
    run(ActionKind::SendBackwardRecvForward, 1, 0, nullptr, &gr0, &in1, nullptr);
    auto gr1 = gradientOf(in1.at("enc"));
    run(ActionKind::SendBackward, 1, -1, nullptr, &gr1, nullptr, nullptr);
    putTensor(r, "act0", in0.at("enc"));
    putTensor(r, "act1", in1.at("enc"));
  }
  if (sc.p2p) {
    const auto& mod = env.cfg.module(st.module);
    if (mod.pp == 2 && st.pp == 0) {  // 2D payload [2,3] = 100*rank + index
      at::Tensor x = at::arange(6, at::kFloat).reshape({2, 3}) + 100.0 * rank;
      at::Tensor g;
      run(ActionKind::SendForward, 2, -1, &x, nullptr, nullptr, nullptr);
      run(ActionKind::RecvBackward, 2, -1, nullptr, nullptr, nullptr, &g);
      putTensor(r, "p2pgrad", g);
    }
    if (mod.pp == 2 && st.pp == 1) {
      std::map<std::string, at::Tensor> in;
      run(ActionKind::RecvForward, 2, -1, nullptr, nullptr, &in, nullptr);
      putTensor(r, "p2pact", in.at(st.module));
      std::map<std::string, at::Tensor> g = {
          {st.module, -(at::arange(6, at::kFloat).reshape({2, 3}) + 100.0 * rank)}};
      run(ActionKind::SendBackward, 2, -1, nullptr, &g, nullptr, nullptr);
    }
  }
  comm.finishSends();  // sends complete lazily; the end of an "iteration" waits for them
  putTransfers(r, rec);
  return r.text();
}

std::vector<double> expectedVals(const std::vector<int>& samples, int mb, double sign,
                                 double shift) {
  at::Tensor t = samplesTensor(samples, mb, sign, shift).to(at::kDouble);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

void checkBridge(const Scenario& sc) {
  auto outs = testing::runRanks(
      sc.world, [&](int rank, int world, int port) { return bridgeBody(sc, rank, world, port); });
  expectAllSucceeded(outs);
  if (::testing::Test::HasFailure()) return;
  auto rep = parsed(outs);

  const int S = static_cast<int>(sc.srcLeaders.size());
  const int D = static_cast<int>(sc.destLeaders.size());
  ASSERT_EQ(S, static_cast<int>(sc.srcBatch.size()));
  // Expected comm map (§3.3) and per-message batch sizes (§3.4, per-split shapes of #5062).
  struct Pair {
    int src, dst, n;
  };
  std::vector<Pair> pairs;
  std::vector<std::vector<int>> destSamples(D);
  if (S >= D) {  // fan-in or 1:1: dest j <- src j*k .. j*k+k-1, concatenated in DP order
    const int k = S / D;
    for (int j = 0; j < D; ++j) {
      for (int q = 0; q < k; ++q) {
        const int i = j * k + q;
        auto s = srcSamples(sc, i);
        destSamples[j].insert(destSamples[j].end(), s.begin(), s.end());
        pairs.push_back({sc.srcLeaders[i], sc.destLeaders[j], sc.srcBatch[i]});
      }
    }
  } else {  // fan-out: src i -> dest i*k+q, tensor_split (first N mod k one larger)
    const int k = D / S;
    for (int i = 0; i < S; ++i) {
      auto s = srcSamples(sc, i);
      const int n = sc.srcBatch[i];
      int pos = 0;
      for (int q = 0; q < k; ++q) {
        const int size = n / k + (q < n % k ? 1 : 0);
        destSamples[i * k + q].assign(s.begin() + pos, s.begin() + pos + size);
        pos += size;
        pairs.push_back({sc.srcLeaders[i], sc.destLeaders[i * k + q], size});
      }
    }
  }
  const int role = S > D   ? static_cast<int>(events::BridgeRole::FanIn)
                   : S < D ? static_cast<int>(events::BridgeRole::FanOut)
                           : static_cast<int>(events::BridgeRole::OneToOne);

  std::set<int> boundaryRanks;
  // Dest boundary: every TP rank of replica j ends with the same, fully ordered tensor.
  for (int j = 0; j < D; ++j) {
    const int64_t n = static_cast<int64_t>(destSamples[j].size());
    for (int rank : sc.destBoundary[j]) {
      SCOPED_TRACE("dest rank " + std::to_string(rank));
      boundaryRanks.insert(rank);
      EXPECT_EQ(rep[rank]["inkeys"], std::vector<std::string>{"enc"});
      for (int mb : {0, 1}) {
        const std::string k = "act" + std::to_string(mb);
        EXPECT_EQ(ints(rep[rank], k + ".shape"), (std::vector<int64_t>{kSeq, n, kHidden}));
        EXPECT_EQ(testing::toDoubles(rep[rank][k + ".vals"]),
                  expectedVals(destSamples[j], mb, 1, 0));
        // Bit-identical to the leader's copy (§10.9).
        EXPECT_EQ(rep[rank][k + ".vals"], rep[sc.destLeaders[j]][k + ".vals"]);
      }
    }
  }
  // Src boundary: the gradient comes back in the replica's own sample order, concatenated
  // along the batch axis 1 (never the sequence axis 0: §10.8), on every TP rank.
  for (int i = 0; i < S; ++i) {
    const auto samples = srcSamples(sc, i);
    for (int rank : sc.srcBoundary[i]) {
      SCOPED_TRACE("src rank " + std::to_string(rank));
      boundaryRanks.insert(rank);
      for (int mb : {0, 1}) {
        const std::string k = "grad" + std::to_string(mb);
        EXPECT_EQ(ints(rep[rank], k + ".shape"),
                  (std::vector<int64_t>{kSeq, static_cast<int64_t>(samples.size()), kHidden}));
        EXPECT_EQ(testing::toDoubles(rep[rank][k + ".vals"]), expectedVals(samples, mb, -1, -0.25));
        EXPECT_EQ(rep[rank][k + ".vals"], rep[sc.srcLeaders[i]][k + ".vals"]);
      }
    }
  }
  // Non-boundary ranks receive nothing over the bridge.
  for (int rank = 0; rank < sc.world; ++rank) {
    if (boundaryRanks.count(rank)) continue;
    for (const char* k : {"act0.shape", "act1.shape", "grad0.shape", "grad1.shape"}) {
      EXPECT_EQ(rep[rank].count(k), 0u) << "rank " << rank << " " << k;
    }
  }

  // Records: every bridge message exactly once on each side, on the leaders of the comm map,
  // with the same checksum and shape on both sides.
  std::map<std::tuple<int, int, int, int, int>, Transfer> bridge;  // (side, src, dst, dir, mb)
  std::vector<Transfer> p2p;
  for (int rank = 0; rank < sc.world; ++rank) {
    for (const auto& t : parseTransfers(rep[rank])) {
      EXPECT_EQ(t.rank, rank);
      EXPECT_EQ(t.rank, t.side == 0 ? t.src : t.dst);
      if (t.edgeKind == static_cast<int>(events::EdgeKind::P2P)) {
        p2p.push_back(t);
        continue;
      }
      EXPECT_EQ(t.edge, "enc->llm");
      EXPECT_EQ(t.role, role);
      auto key = std::make_tuple(t.side, t.src, t.dst, t.dir, t.mb);
      EXPECT_EQ(bridge.count(key), 0u) << "duplicate record " << t.src << "->" << t.dst;
      bridge[key] = t;
    }
  }
  EXPECT_EQ(bridge.size(), pairs.size() * 2 /*sides*/ * 2 /*dirs*/ * 2 /*mbs*/);
  for (const auto& p : pairs) {
    for (int dir : {0, 1}) {
      for (int mb : {0, 1}) {
        const int from = dir == 0 ? p.src : p.dst, to = dir == 0 ? p.dst : p.src;
        SCOPED_TRACE("message " + std::to_string(from) + "->" + std::to_string(to) + " dir " +
                     std::to_string(dir) + " mb " + std::to_string(mb));
        auto s = bridge.find({0, from, to, dir, mb});
        auto r = bridge.find({1, from, to, dir, mb});
        ASSERT_NE(s, bridge.end());
        ASSERT_NE(r, bridge.end());
        const std::vector<int64_t> shape = {kSeq, p.n, kHidden};
        EXPECT_EQ(s->second.shape, shape);
        EXPECT_EQ(r->second.shape, shape);
        EXPECT_EQ(s->second.checksum, r->second.checksum);
        EXPECT_NE(s->second.checksum, "0");
        EXPECT_EQ(s->second.bytes, kSeq * p.n * kHidden * 4);
      }
    }
  }

  if (!sc.p2p) {
    EXPECT_TRUE(p2p.empty());
    return;
  }
  // P2P: [2,3] travels as [2,3,1] and is restored to [2,3] (§4.4 / §10.10 over a real wire).
  int p2pStage1 = 0;
  for (int rank = 0; rank < sc.world; ++rank) {
    const Mod& m = rank >= sc.llm.offset ? sc.llm : sc.enc;
    if (m.pp != 2) continue;
    const int stage = ((rank - m.offset) / m.tp) % m.pp;
    SCOPED_TRACE("p2p rank " + std::to_string(rank));
    std::vector<double> want(6);
    if (stage == 1) {
      ++p2pStage1;
      const int below = rank - m.tp;
      for (int i = 0; i < 6; ++i) want[i] = 100.0 * below + i;
      EXPECT_EQ(ints(rep[rank], "p2pact.shape"), (std::vector<int64_t>{2, 3}));
      EXPECT_EQ(testing::toDoubles(rep[rank]["p2pact.vals"]), want);
    } else {
      const int above = rank + m.tp;
      for (int i = 0; i < 6; ++i) want[i] = -(100.0 * above + i);
      EXPECT_EQ(ints(rep[rank], "p2pgrad.shape"), (std::vector<int64_t>{2, 3}));
      EXPECT_EQ(testing::toDoubles(rep[rank]["p2pgrad.vals"]), want);
    }
  }
  ASSERT_GT(p2pStage1, 0);
  EXPECT_EQ(p2p.size(), static_cast<size_t>(p2pStage1) * 2 /*sides*/ * 2 /*dirs*/);
  for (const auto& t : p2p) {
    EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3, 1}));
    bool matched = false;
    for (const auto& u : p2p) {
      matched |= u.side != t.side && u.src == t.src && u.dst == t.dst && u.dir == t.dir &&
                 u.checksum == t.checksum;
    }
    EXPECT_TRUE(matched) << t.src << "->" << t.dst << " dir " << t.dir;
  }
}

TEST(CommBridge, World2OneToOne) {
  Scenario sc;
  sc.enc = {1, 1, 1, 0};
  sc.llm = {1, 1, 1, 1};
  sc.world = 2;
  sc.srcBatch = {2};
  sc.srcBoundary = {{0}};
  sc.destBoundary = {{1}};
  sc.srcLeaders = {0};
  sc.destLeaders = {1};
  checkBridge(sc);
}

TEST(CommBridge, World3FanOutUnevenFiveSplitsThreeAndTwo) {
  Scenario sc;
  sc.enc = {1, 1, 1, 0};
  sc.llm = {1, 1, 2, 1};
  sc.world = 3;
  sc.srcBatch = {5};  // dest 1 gets samples 0-2, dest 2 gets 3-4; gradients 3+2 -> 5
  sc.srcBoundary = {{0}};
  sc.destBoundary = {{1}, {2}};
  sc.srcLeaders = {0};
  sc.destLeaders = {1, 2};
  checkBridge(sc);
}

TEST(CommBridge, World4FanInDp2ToDp1BroadcastsToTheDestTpRanks) {
  Scenario sc;
  sc.enc = {1, 1, 2, 0};
  sc.llm = {2, 1, 1, 2};
  sc.world = 4;
  sc.srcBatch = {2, 2};  // llm leader 2 gets [src 0's rows, src 1's rows]
  sc.srcBoundary = {{0}, {1}};
  sc.destBoundary = {{2, 3}};
  sc.srcLeaders = {0, 1};
  sc.destLeaders = {2};
  checkBridge(sc);
}

TEST(CommBridge, World4TpMismatchOnlyLeadersTalkAndBothBoundariesAgree) {
  Scenario sc;
  sc.enc = {2, 1, 1, 0};
  sc.llm = {2, 1, 1, 2};
  sc.world = 4;
  sc.srcBatch = {3};
  sc.srcBoundary = {{0, 1}};
  sc.destBoundary = {{2, 3}};
  sc.srcLeaders = {1};   // tp = T-1
  sc.destLeaders = {2};  // tp = 0
  checkBridge(sc);
}

TEST(CommBridge, World8FanInUnevenIntoPipelinedLlmWithP2P) {
  // The default layout: vision tp2 dp2 on 0-3 -> llm tp2 pp2 on 4-7 (§10.3 grid).
  Scenario sc;
  sc.enc = {2, 1, 2, 0};
  sc.llm = {2, 2, 1, 4};
  sc.world = 8;
  sc.srcBatch = {3, 2};  // 5 rows at the llm; the gradient splits 5 -> 3, 2 back
  sc.srcBoundary = {{0, 1}, {2, 3}};
  sc.destBoundary = {{4, 5}};
  sc.srcLeaders = {1, 3};
  sc.destLeaders = {4};
  sc.p2p = true;
  checkBridge(sc);
}

TEST(CommBridge, World8FanOutFromPipelinedEncoderUnevenWithP2P) {
  // fan_out.toml: vision tp2 pp2 on 0-3 -> llm dp4 on 4-7: 3 -> {4,5,6,7}.
  Scenario sc;
  sc.enc = {2, 2, 1, 0};
  sc.llm = {1, 1, 4, 4};
  sc.world = 8;
  sc.srcBatch = {6};  // 2,2,1,1
  sc.srcBoundary = {{2, 3}};
  sc.destBoundary = {{4}, {5}, {6}, {7}};
  sc.srcLeaders = {3};
  sc.destLeaders = {4, 5, 6, 7};
  sc.p2p = true;
  checkBridge(sc);
}

TEST(CommBridge, World8FanInDp4ToDp2TwoReceivers) {
  // 4 <- {0,1}, 6 <- {2,3}; the dest boundaries [4,5] and [6,7] each get their own batch.
  Scenario sc;
  sc.enc = {1, 1, 4, 0};
  sc.llm = {2, 1, 2, 4};
  sc.world = 8;
  sc.srcBatch = {2, 1, 2, 1};  // each llm replica: 3 rows, split back 2 + 1
  sc.srcBoundary = {{0}, {1}, {2}, {3}};
  sc.destBoundary = {{4, 5}, {6, 7}};
  sc.srcLeaders = {0, 1, 2, 3};
  sc.destLeaders = {4, 6};
  checkBridge(sc);
}

// ---- 3. 2D/3D adaptation and splits (no process groups) ------------------------------------

TEST(CommPrepare, TwoDimsGainATrailingAxisAndComeBack) {
  at::Tensor x = at::arange(6, at::kFloat).reshape({2, 3});
  at::Tensor w = engine::prepareForComm(x);
  EXPECT_EQ(w.sizes().vec(), (std::vector<int64_t>{2, 3, 1}));
  at::Tensor back = engine::restoreFromComm(w);
  EXPECT_EQ(back.sizes().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(at::equal(back, x));
}

TEST(CommPrepare, ThreeDimsPassUnchanged) {
  at::Tensor x = at::arange(24, at::kFloat).reshape({2, 3, 4});
  at::Tensor w = engine::prepareForComm(x);
  EXPECT_EQ(w.sizes().vec(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_TRUE(at::equal(w, x));
  EXPECT_TRUE(at::equal(engine::restoreFromComm(w), x));
}

TEST(CommPrepare, AmbiguousTrailingOneIsRejected) {
  at::Tensor x = at::zeros({2, 3, 1});
  EXPECT_THROW(engine::prepareForComm(x), std::invalid_argument);
  try {
    engine::prepareForComm(x);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[2,3,1]"), std::string::npos) << e.what();
  }
}

TEST(CommPrepare, UndefinedStaysUndefined) {
  EXPECT_FALSE(engine::prepareForComm(at::Tensor()).defined());
  EXPECT_FALSE(engine::restoreFromComm(at::Tensor()).defined());
}

TEST(CommPrepare, SplitForPeersIsTensorSplitAlongTheGivenAxis) {
  at::Tensor x = at::arange(3 * 5 * 2, at::kFloat).reshape({3, 5, 2});
  auto parts = engine::splitForPeers(x, 2, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].sizes().vec(), (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(parts[1].sizes().vec(), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_TRUE(parts[0].is_contiguous());
  EXPECT_TRUE(parts[1].is_contiguous());
  EXPECT_TRUE(at::equal(at::cat(parts, 1), x));
  auto four = engine::splitForPeers(x.narrow(1, 0, 4).contiguous().repeat({1, 4, 1}), 4, 1);
  ASSERT_EQ(four.size(), 4u);
  for (const auto& p : four) EXPECT_EQ(p.size(1), 4);
}

}  // namespace
}  // namespace stagescope
