// causalClock (core/analysis/Causal.h) against its direct definition, on synthetic runs with
// TP groups, DP groups, a fan-in bridge, colocated modules and a skewed clock: the dependencies
// found by comparing every pair of actions (a receive after its send's start; members of one
// collective after every other member's start), and the clock as the least fixed point of
//   start(r, 0) = 0,  start(r, i) = end(r, i - 1) + 1,
//   end(r, i)   = max(start(r, i), max over dependencies d of start(d) + 1) + 1,
// found by repeating the update until nothing changes.  Quadratic: small runs only.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/analysis/Causal.h"
#include "core/analysis/Pairing.h"
#include "tests/support/SyntheticRun.h"

namespace stagescope::analysis {
namespace {

using model::RunModel;

const events::RankInfo* placed(const RunModel& run, int rank, const std::string& module) {
  const auto* info = module.empty() ? nullptr : findRank(run, rank, module);
  return info ? info : findRank(run, rank);
}

// Whether action j of rank q is a collective peer of action i of rank r.
bool collectivePeers(const RunModel& run, size_t r, size_t i, size_t q, size_t j) {
  const auto& a = run.actions[r][i];
  const auto& b = run.actions[q][j];
  if (r == q || a.kind == events::ActionKind::OptimizerStep || a.kind != b.kind ||
      a.iteration != b.iteration)
    return false;
  const auto* pa = placed(run, static_cast<int>(r), a.module);
  const auto* pb = placed(run, static_cast<int>(q), b.module);
  if (!pa || !pb || pa->module != pb->module || pa->pp != pb->pp || pa->cp != pb->cp) return false;
  if (a.kind == events::ActionKind::DpReduce) return pa->tp == pb->tp;
  return pa->dp == pb->dp && a.microbatch == b.microbatch;
}

CausalClock directClock(const RunModel& run) {
  using Ref = std::pair<size_t, size_t>;
  const size_t n = run.actions.size();
  std::vector<std::vector<std::vector<Ref>>> deps(n);
  for (size_t r = 0; r < n; ++r) deps[r].resize(run.actions[r].size());
  std::vector<model::TransferPair> scratch;
  for (const auto& p : pairsOf(run, scratch)) {
    if (p.send < 0 || p.recv < 0) continue;
    const auto& s = run.transfers[p.send];
    const auto& v = run.transfers[p.recv];
    const int64_t si = findAction(run, s.rank, s.iteration, s.actionSeq);
    const int64_t vi = findAction(run, v.rank, v.iteration, v.actionSeq);
    if (si >= 0 && vi >= 0) deps[v.rank][vi].push_back({s.rank, si});
  }
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < run.actions[r].size(); ++i)
      for (size_t q = 0; q < n; ++q)
        for (size_t j = 0; j < run.actions[q].size(); ++j)
          if (collectivePeers(run, r, i, q, j)) deps[r][i].push_back({q, j});
  CausalClock c;
  c.start.resize(n);
  c.end.resize(n);
  for (size_t r = 0; r < n; ++r) {
    c.start[r].assign(run.actions[r].size(), 0);
    c.end[r].assign(run.actions[r].size(), 0);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r)
      for (size_t i = 0; i < run.actions[r].size(); ++i) {
        const int64_t start = i == 0 ? 0 : c.end[r][i - 1] + 1;
        int64_t t = start;
        for (auto [q, j] : deps[r][i]) t = std::max(t, c.start[q][j] + 1);
        if (start != c.start[r][i] || t + 1 != c.end[r][i]) changed = true;
        c.start[r][i] = start;
        c.end[r][i] = t + 1;
      }
  }
  return c;
}

void expectDirectClock(const testing::SyntheticSpec& spec) {
  const RunModel run = testing::makeSyntheticRun(spec);
  std::vector<model::TransferPair> scratch;
  const CausalClock got = causalClock(run, pairsOf(run, scratch));
  const CausalClock want = directClock(run);
  ASSERT_EQ(got.start.size(), want.start.size());
  size_t actions = 0;
  for (size_t r = 0; r < want.start.size(); ++r) {
    actions += want.start[r].size();
    EXPECT_EQ(got.start[r], want.start[r]) << "rank " << r;
    EXPECT_EQ(got.end[r], want.end[r]) << "rank " << r;
  }
  EXPECT_GT(actions, 100u);
}

TEST(CausalClock, EqualsTheDirectDefinitionWithTpDpAndFanIn) {
  auto spec = testing::defaultSyntheticSpec();  // vision tp1 pp2 dp2 -> llm tp2 pp3
  spec.clockSkewNs = {0, 5000000, -3000000};
  expectDirectClock(spec);
}

TEST(CausalClock, EqualsTheDirectDefinitionWithTpAndDpInOneModule) {
  testing::SyntheticSpec spec;
  spec.modules = {{"vision", "encoder", 2, 1, 2, 0, 2}, {"llm", "llm", 2, 2, 2, 4, 2}};
  spec.iterations = 2;
  spec.microbatches = 3;
  expectDirectClock(spec);
}

TEST(CausalClock, EqualsTheDirectDefinitionWithColocatedModules) {
  expectDirectClock(testing::colocatedSyntheticSpec());
  expectDirectClock(testing::colocatedEncodersSpec());
}

}  // namespace
}  // namespace stagescope::analysis
