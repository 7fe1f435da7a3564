// coverageOf (core/analysis/Coverage.h), linear in the run's size, against an independent
// reference: the definition written out directly (for every rank and iteration, scan the whole
// plan, the whole executed list and every transfer), on synthetic runs with records removed at
// random, a plan stored once, a record filter, and colocated ranks.  Every field and every line
// of `missing` must agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/analysis/Coverage.h"
#include "tests/support/SyntheticRun.h"

namespace stagescope::analysis {
namespace {

using events::ActionRecord;
using model::RunModel;

// Distinct peers by a set-free scan (as simple as possible, not the code under test).
int64_t referenceMessages(const ActionRecord& p) {
  std::vector<int> distinct;
  for (int peer : p.peers)
    if (std::find(distinct.begin(), distinct.end(), peer) == distinct.end())
      distinct.push_back(peer);
  const auto all = static_cast<int64_t>(p.peers.size());
  const auto n = static_cast<int64_t>(distinct.size());
  switch (p.kind) {
    case events::ActionKind::SendForward:
    case events::ActionKind::RecvForward:
    case events::ActionKind::SendBackward:
    case events::ActionKind::RecvBackward:
      return all;
    case events::ActionKind::SendForwardRecvBackward:
    case events::ActionKind::SendBackwardRecvForward:
      return 2 * n;
    default:
      return 0;
  }
}

RunCoverage referenceCoverage(const RunModel& run, const RecordFilter& filter) {
  RunCoverage c;
  c.filter = filter;
  c.status = toString(run.info.status);
  if (run.partial) c.status += ", partial file";
  c.completed = run.info.status == events::RunStatus::Completed && !run.partial;
  const int iterations = std::max(run.info.iterations, 0);
  const size_t nRanks = std::max(
      {run.plan.size(), run.actions.size(), static_cast<size_t>(std::max(run.info.worldSize, 0))});
  std::vector<int> ok(iterations, 1), wanted(iterations, 0);
  for (size_t r = 0; r < nRanks; ++r) {
    const int rank = static_cast<int>(r);
    const std::string module = run.moduleLabel(rank);
    const std::vector<ActionRecord> none;
    const auto& plan = r < run.plan.size() ? run.plan[r] : none;
    const auto& done = r < run.actions.size() ? run.actions[r] : none;
    const bool once =
        !plan.empty() && plan.front().iteration == plan.back().iteration && iterations > 1;
    int reported = 0;
    for (int it = 0; it < iterations; ++it) {
      int64_t planned = 0, messages = 0, doneHere = 0, sides = 0;
      for (const auto& p : plan) {
        if (!once && p.iteration != it) continue;
        ++planned;
        messages += referenceMessages(p);
      }
      if (!filter.wantsRankOf(run, it, rank)) {
        c.skippedByFilter += planned;
        continue;
      }
      wanted[it] = 1;
      for (const auto& a : done) doneHere += a.iteration == it;
      for (const auto& t : run.transfers) sides += t.rank == rank && t.iteration == it;
      c.actionsExpected += planned;
      c.actionsRecorded += std::min(doneHere, planned);
      c.messagesExpected += messages;
      c.messagesRecorded += std::min(sides, messages);
      if (doneHere < planned || sides < messages) {
        ok[it] = 0;
        if (reported++ < 2)
          c.missing.push_back(
              "rank " + std::to_string(rank) + (module.empty() ? "" : " (" + module + ")") +
              " iteration " + std::to_string(it) + ": " + std::to_string(doneHere) + " of " +
              std::to_string(planned) + " planned actions and " + std::to_string(sides) + " of " +
              std::to_string(messages) + " message sides recorded");
      }
    }
  }
  for (int it = 0; it < iterations; ++it) {
    c.iterationsPlanned += wanted[it];
    c.iterationsRecorded += wanted[it] && ok[it];
  }
  if (!c.completed)
    c.missing.insert(c.missing.begin(),
                     "the run did not complete (status " + c.status +
                         (run.info.statusReason.empty() ? "" : ": " + run.info.statusReason) + ")");
  return c;
}

void expectSame(const RunCoverage& got, const RunCoverage& want, const std::string& what) {
  EXPECT_EQ(got.completed, want.completed) << what;
  EXPECT_EQ(got.status, want.status) << what;
  EXPECT_EQ(got.iterationsPlanned, want.iterationsPlanned) << what;
  EXPECT_EQ(got.iterationsRecorded, want.iterationsRecorded) << what;
  EXPECT_EQ(got.actionsExpected, want.actionsExpected) << what;
  EXPECT_EQ(got.actionsRecorded, want.actionsRecorded) << what;
  EXPECT_EQ(got.messagesExpected, want.messagesExpected) << what;
  EXPECT_EQ(got.messagesRecorded, want.messagesRecorded) << what;
  EXPECT_EQ(got.skippedByFilter, want.skippedByFilter) << what;
  EXPECT_EQ(got.missing, want.missing) << what;
  EXPECT_EQ(got.complete(), want.complete()) << what;
}

// Removes each action and each transfer with probability `p` (order kept).
void dropAtRandom(RunModel& run, double p, std::mt19937& rng) {
  std::bernoulli_distribution drop(p);
  for (auto& list : run.actions)
    list.erase(std::remove_if(list.begin(), list.end(), [&](const auto&) { return drop(rng); }),
               list.end());
  run.transfers.erase(std::remove_if(run.transfers.begin(), run.transfers.end(),
                                     [&](const auto&) { return drop(rng); }),
                      run.transfers.end());
}

TEST(Coverage, MatchesTheDirectDefinitionOnRunsWithGaps) {
  auto spec = testing::defaultSyntheticSpec();
  spec.iterations = 5;
  spec.gradients = false;
  const RunModel full = testing::makeSyntheticRun(spec);
  expectSame(coverageOf(full), referenceCoverage(full, {}), "complete run");
  EXPECT_TRUE(coverageOf(full).complete());
  std::mt19937 rng(11);
  for (double p : {0.001, 0.01, 0.2}) {
    RunModel run = full;
    dropAtRandom(run, p, rng);
    const auto got = coverageOf(run);
    expectSame(got, referenceCoverage(run, {}), "drop p=" + std::to_string(p));
    EXPECT_FALSE(got.complete()) << p;
  }
}

TEST(Coverage, MatchesTheDirectDefinitionWithAFilterAndAPlanStoredOnce) {
  auto spec = testing::defaultSyntheticSpec();
  spec.iterations = 4;
  spec.gradients = false;
  RunModel run = testing::makeSyntheticRun(spec);
  std::mt19937 rng(5);
  dropAtRandom(run, 0.02, rng);
  RecordFilter filter;
  filter.iterations = {1, 3};
  filter.ranks = {0, 2, 5, 7};
  expectSame(coverageOf(run, filter), referenceCoverage(run, filter), "filtered");
  // Plan stored once: every rank keeps its iteration-0 plan only.
  for (auto& list : run.plan)
    list.erase(
        std::remove_if(list.begin(), list.end(), [](const auto& a) { return a.iteration != 0; }),
        list.end());
  expectSame(coverageOf(run), referenceCoverage(run, {}), "plan once");
  expectSame(coverageOf(run, filter), referenceCoverage(run, filter), "plan once, filtered");
  // A rank the plan knows but nothing recorded, and a run that did not complete.
  run.actions.resize(run.actions.size() + 1);
  run.plan.push_back(run.plan.front());
  run.info.status = events::RunStatus::Failed;
  run.info.statusReason = "rank 3 died";
  expectSame(coverageOf(run), referenceCoverage(run, {}), "extra rank, failed");
}

TEST(Coverage, MatchesTheDirectDefinitionOnColocatedRanks) {
  auto spec = testing::colocatedSyntheticSpec();
  spec.iterations = 3;
  spec.gradients = false;
  RunModel run = testing::makeSyntheticRun(spec);
  std::mt19937 rng(3);
  dropAtRandom(run, 0.05, rng);
  expectSame(coverageOf(run), referenceCoverage(run, {}), "colocated");
  RecordFilter filter;
  filter.modules = {"vision"};
  expectSame(coverageOf(run, filter), referenceCoverage(run, filter), "colocated, filtered");
}

}  // namespace
}  // namespace stagescope::analysis
