// Colocated modules (several modules' stages on one rank) in the read model and the analysis:
// the ranks table's one row per (rank, module), read back through a real run file; a local
// hand-off (a message from a rank to itself between two of its modules) pairs like any
// transfer; coverage judges a filtered colocated rank per module; the causal order ties on the
// global stage of each action's own module; check passes a clean colocated run and names the
// local hand-off when it is corrupted; compare names the local hand-off as the first
// divergence.  Runs come from the synthetic generator (tests/support/SyntheticRun).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/analysis/Causal.h"
#include "core/analysis/Check.h"
#include "core/analysis/Compare.h"
#include "core/analysis/Coverage.h"
#include "core/analysis/NonFinite.h"
#include "core/analysis/Pairing.h"
#include "core/model/Pairing.h"
#include "storage/RunFileWriter.h"
#include "storage/RunReader.h"
#include "tests/support/SyntheticRun.h"

namespace stagescope::analysis {
namespace {

namespace fs = std::filesystem;
using events::ActionKind;
using events::Side;
using model::RunModel;
using testing::colocatedEncodersSpec;
using testing::colocatedSyntheticSpec;
using testing::makeSyntheticRun;

// vision (tp1 pp1 @0) and llm (tp1 pp2 @0): rank 0 holds vision and llm stage 0, so the only
// bridge is a local hand-off on rank 0 and it is the first message of every microbatch.
testing::SyntheticSpec encoderOnLlmStage0() {
  testing::SyntheticSpec s;
  s.modules = {{"vision", "encoder", 1, 1, 1, 0, 2}, {"llm", "llm", 1, 2, 1, 0, 4}};
  s.iterations = 2;
  s.microbatches = 4;
  return s;
}

std::vector<size_t> localHandOffs(const RunModel& run) {
  std::vector<size_t> out;
  for (size_t i = 0; i < run.transfers.size(); ++i)
    if (model::isLocalHandOff(run.transfers[i])) out.push_back(i);
  return out;
}

TEST(ColocatedRun, RanksTableRowsPerModuleSurviveARunFile) {
  const RunModel synthetic = makeSyntheticRun(colocatedSyntheticSpec());
  const fs::path dir = fs::temp_directory_path() / ("colocation_rows_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "coloc.db").string();
  storage::writeRunFile(synthetic, path);
  const RunModel run = storage::loadRun(path);
  fs::remove_all(dir);

  EXPECT_EQ(run.rankCount(), 4);
  ASSERT_EQ(run.ranks.size(), 6u);  // rank 1 holds three modules
  const auto rows = run.modulesOf(1);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(run.colocated(1));
  EXPECT_FALSE(run.colocated(0));
  // By global stage: vision's last stage and audio (right-aligned) at 1, llm stage 0 at 2.
  EXPECT_EQ(rows[0].globalStage, 1);
  EXPECT_EQ(rows[2].module, "llm");
  EXPECT_EQ(rows[2].globalStage, 2);
  EXPECT_EQ(run.moduleLabel(1), "vision+audio+llm");  // ties on the stage: config order
  ASSERT_NE(run.rankInfo(1, "vision"), nullptr);
  EXPECT_EQ(run.rankInfo(1, "vision")->pp, 1);
  EXPECT_EQ(run.rankInfo(1, "llm")->pp, 0);
  EXPECT_EQ(run.rankInfo(0, "llm"), nullptr);
  EXPECT_EQ(run.rankInfo(2)->module, "llm");
  EXPECT_EQ(run.rankInfo(2)->pp, 1);
  // Each action names its module; the plan of rank 1 interleaves all three.
  std::set<std::string> modules;
  for (const auto& a : run.plan[1]) modules.insert(a.module);
  EXPECT_EQ(modules, (std::set<std::string>{"", "vision", "audio", "llm"}));
}

TEST(ColocatedRun, LocalHandOffsPairLikeAnyTransfer) {
  const RunModel run = makeSyntheticRun(colocatedSyntheticSpec());
  const auto local = localHandOffs(run);
  // vision->llm and audio->llm on rank 1, activations and gradients, both sides, every mb.
  const size_t perSide = 2 /*edges*/ * 2 /*directions*/ * 4 /*mb*/ * 2 /*iterations*/;
  ASSERT_EQ(local.size(), 2 * perSide);
  for (size_t i : local) {
    EXPECT_EQ(run.transfers[i].rank, 1);
    EXPECT_EQ(run.transfers[i].edgeKind, events::EdgeKind::Bridge);
  }
  const auto pairs = model::pairTransfers(run.transfers);
  size_t localPairs = 0;
  for (const auto& p : pairs) {
    ASSERT_TRUE(p.complete());
    EXPECT_TRUE(p.ok());
    const auto& s = run.transfers[p.send];
    const auto& r = run.transfers[p.recv];
    EXPECT_EQ(s.side, Side::Send);
    EXPECT_EQ(r.side, Side::Recv);
    if (model::isLocalHandOff(s)) {
      ++localPairs;
      EXPECT_TRUE(model::isLocalHandOff(r));
      // The sides sit on the sender module's and the receiver module's rows of the rank.
      const auto [src, dst] = model::edgeModules(s);
      EXPECT_EQ(run.placementOf(s)->module, src);
      EXPECT_EQ(run.placementOf(r)->module, dst);
    }
  }
  EXPECT_EQ(localPairs, perSide);
  // The pipeline position of a local hand-off is the sender module's stage on that rank.
  const auto& firstLocal = run.transfers[local.front()];
  EXPECT_EQ(sourceStage(run, firstLocal),
            run.rankInfo(1, model::edgeModules(firstLocal).first)->globalStage);
}

TEST(ColocatedRun, CheckPassesACleanColocatedRunAndNamesACorruptLocalHandOff) {
  for (const auto& spec :
       {colocatedSyntheticSpec(), colocatedEncodersSpec(), encoderOnLlmStage0()}) {
    const RunModel run = makeSyntheticRun(spec);
    CheckOptions opts;
    opts.only = {"unmatched_transfer", "plan_order", "message_count", "shape_mismatch",
                 "checksum_mismatch"};
    // The report outlives the pointers into it (a find() on the temporary dangled: ASan's
    // heap-use-after-free once these tests ran in the sanitizer pass).
    const CheckReport report = checkRun(run, opts);
    for (const auto& name : opts.only) {
      const CheckResult* c = report.find(name);
      ASSERT_NE(c, nullptr) << name;
      EXPECT_EQ(c->status, CheckStatus::Passed) << name << ": " << c->summary;
    }
  }
  // A local hand-off whose receive saw other bytes than were sent.
  RunModel run = makeSyntheticRun(encoderOnLlmStage0());
  const auto local = localHandOffs(run);
  ASSERT_FALSE(local.empty());
  size_t recv = local.front();
  while (run.transfers[recv].side != Side::Recv) ++recv;
  run.transfers[recv].checksum ^= 0x40;
  testing::buildPairs(run);
  const CheckReport report = checkRun(run);
  const CheckResult* c = report.find("checksum_mismatch");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->status, CheckStatus::Failed);
  ASSERT_FALSE(c->findings.empty());
  EXPECT_EQ(c->findings.front().edge, "vision->llm");
  EXPECT_EQ(c->findings.front().rank, 0);
  EXPECT_EQ(c->findings.front().peerRank, 0);
}

TEST(ColocatedRun, CoverageKeepsAColocatedRankWhenTheFilterKeepsAnyOfItsModules) {
  RunModel run = makeSyntheticRun(colocatedSyntheticSpec());
  // Recorded with [record] modules = ["llm"]: the engine keeps every record of a rank that
  // holds the llm (rank 1 also holds vision and audio) and none of rank 0 (vision only).
  RecordFilter filter;
  filter.modules = {"llm"};
  run.actions[0].clear();
  run.transfers.erase(std::remove_if(run.transfers.begin(), run.transfers.end(),
                                     [](const auto& t) { return t.rank == 0; }),
                      run.transfers.end());
  testing::buildPairs(run);
  int64_t planned = 0;
  for (const auto& list : run.plan) planned += static_cast<int64_t>(list.size());
  const int64_t rank0 = static_cast<int64_t>(run.plan[0].size());
  const RunCoverage c = coverageOf(run, filter);
  EXPECT_TRUE(c.complete()) << c.summary();
  EXPECT_EQ(c.actionsExpected, planned - rank0);  // rank 1's encoder actions are expected
  EXPECT_EQ(c.skippedByFilter, rank0);
  // The same records judged as unfiltered miss rank 0.
  EXPECT_FALSE(coverageOf(run).complete());
  // Recorded with modules = ["audio"]: rank 1 (audio, vision, llm) is kept whole.
  filter.modules = {"audio"};
  EXPECT_EQ(coverageOf(run, filter).actionsExpected, static_cast<int64_t>(run.plan[1].size()));
  // Check's pairing judges the same rule: vision's messages from rank 0 to rank 1 have no
  // sender by design, not by loss.
  CheckOptions opts;
  opts.filter.modules = {"llm"};
  opts.only = {"unmatched_transfer", "plan_order", "message_count"};
  const CheckReport report = checkRun(run, opts);
  for (const auto& name : opts.only) {
    const CheckResult* r = report.find(name);
    ASSERT_NE(r, nullptr) << name;
    EXPECT_EQ(r->status, CheckStatus::Passed) << name << ": " << r->summary;
  }
}

TEST(ColocatedRun, CausalOrderTiesOnEachActionsOwnModuleStage) {
  const RunModel run = makeSyntheticRun(encoderOnLlmStage0());
  const CausalOrder order(run);
  const auto& acts = run.actions[0];
  auto forwardOf = [&](const std::string& module) {
    for (const auto& a : acts)
      if (a.kind == ActionKind::Forward && a.module == module && a.microbatch == 0) return a;
    ADD_FAILURE() << "no forward of " << module;
    return events::ActionRecord{};
  };
  const auto enc = forwardOf("vision"), llm = forwardOf("llm");
  EXPECT_EQ(order.ofAction(0, enc.iteration, enc.seq, false).globalStage, 0);
  EXPECT_EQ(order.ofAction(0, llm.iteration, llm.seq, false).globalStage, 1);
  // Plan order on the rank: the encoder's forward, the hand-off, then the llm's forward.
  EXPECT_LT(order.ofAction(0, enc.iteration, enc.seq, true),
            order.ofAction(0, llm.iteration, llm.seq, false));
  // The loss belongs to the llm's last stage (rank 1), at the end of its forward.
  ASSERT_FALSE(run.losses.empty());
  EXPECT_EQ(order.ofLoss(run.losses.front()).rank, 1);
}

TEST(ColocatedRun, FirstNonFiniteIsTheLocalHandOffSend) {
  testing::SyntheticSpec spec = encoderOnLlmStage0();
  spec.nanIteration = 1;
  spec.nanMicrobatch = 2;
  const RunModel run = makeSyntheticRun(spec);
  const auto list = nonFiniteInCausalOrder(run);
  ASSERT_FALSE(list.empty());
  ASSERT_EQ(list.front().kind, NonFiniteRecord::Kind::Transfer);
  const auto& t = run.transfers[list.front().index];
  EXPECT_EQ(t.edge, "vision->llm");
  EXPECT_EQ(t.side, Side::Send);
  EXPECT_TRUE(model::isLocalHandOff(t));
  EXPECT_EQ(t.iteration, 1);
  EXPECT_EQ(t.microbatch, 2);
}

TEST(ColocatedRun, CompareNamesTheLocalHandOffAsFirstDivergence) {
  const RunModel a = makeSyntheticRun(encoderOnLlmStage0());
  testing::SyntheticSpec spec = encoderOnLlmStage0();
  spec.divergeIteration = 1;
  spec.divergeMicrobatch = 1;
  const RunModel b = makeSyntheticRun(spec);
  const Comparison c = compareRuns(a, b);
  EXPECT_EQ(c.verdict, Verdict::Diverged);
  ASSERT_TRUE(c.firstDivergent.has_value());
  EXPECT_EQ(c.firstDivergent->edge, "vision->llm");
  EXPECT_EQ(c.firstDivergent->iteration, 1);
  EXPECT_EQ(c.firstDivergent->microbatch, 1);
  EXPECT_EQ(c.firstDivergent->a.srcRank, 0);
  EXPECT_EQ(c.firstDivergent->a.dstRank, 0);
  ASSERT_TRUE(c.first.has_value());
  EXPECT_EQ(c.first->edge, "vision->llm");
}

}  // namespace
}  // namespace stagescope::analysis
