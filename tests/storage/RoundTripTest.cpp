// Every record kind, every field, through ShardWriter → mergeShards → loadRun at each level.
#include <gtest/gtest.h>

#include "StorageTestUtil.h"
#include "core/events/CapturedLayout.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/Schema.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

namespace stagescope::storage::test {
namespace {

using events::RecordLevel;

void expectAction(const events::ActionRecord& got, const events::ActionRecord& want, bool times) {
  EXPECT_EQ(got.rank, want.rank);
  EXPECT_EQ(got.iteration, want.iteration);
  EXPECT_EQ(got.seq, want.seq);
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.microbatch, want.microbatch);
  EXPECT_EQ(got.module, want.module);
  EXPECT_EQ(got.stage, want.stage);
  EXPECT_EQ(got.peers, want.peers);
  if (times) {
    EXPECT_EQ(got.startNs, want.startNs);
    EXPECT_EQ(got.endNs, want.endNs);
  }
}

void expectStats(bool gotHas, const events::TensorStats& got, bool wantHas,
                 const events::TensorStats& want) {
  ASSERT_EQ(gotHas, wantHas);
  if (!wantHas) return;
  EXPECT_EQ(got.min, want.min);
  EXPECT_EQ(got.max, want.max);
  EXPECT_EQ(got.mean, want.mean);
  EXPECT_EQ(got.l2, want.l2);
  EXPECT_EQ(got.nanCount, want.nanCount);
  EXPECT_EQ(got.infCount, want.infCount);
  EXPECT_EQ(got.numel, want.numel);
}

void expectTransfer(const events::TransferRecord& got, const events::TransferRecord& want,
                    RecordLevel level) {
  EXPECT_EQ(got.rank, want.rank);
  EXPECT_EQ(got.side, want.side);
  EXPECT_EQ(got.srcRank, want.srcRank);
  EXPECT_EQ(got.dstRank, want.dstRank);
  EXPECT_EQ(got.srcGroupRank, want.srcGroupRank);
  EXPECT_EQ(got.dstGroupRank, want.dstGroupRank);
  EXPECT_EQ(got.edge, want.edge);
  EXPECT_EQ(got.edgeKind, want.edgeKind);
  EXPECT_EQ(got.role, want.role);
  EXPECT_EQ(got.direction, want.direction);
  EXPECT_EQ(got.iteration, want.iteration);
  EXPECT_EQ(got.microbatch, want.microbatch);
  EXPECT_EQ(got.actionSeq, want.actionSeq);
  EXPECT_EQ(got.shape, want.shape);
  EXPECT_EQ(got.dtype, want.dtype);
  EXPECT_EQ(got.bytes, want.bytes);
  EXPECT_EQ(got.startNs, want.startNs);
  EXPECT_EQ(got.endNs, want.endNs);
  const bool stats = level >= RecordLevel::Stats;
  EXPECT_EQ(got.checksum, stats ? want.checksum : 0u);
  expectStats(got.hasStats, got.stats, stats && want.hasStats, want.stats);
  EXPECT_EQ(got.payload, level == RecordLevel::Full ? want.payload : std::vector<uint8_t>{});
}

void expectGradient(const events::GradientRecord& got, const events::GradientRecord& want,
                    RecordLevel level) {
  EXPECT_EQ(got.rank, want.rank);
  EXPECT_EQ(got.iteration, want.iteration);
  EXPECT_EQ(got.microbatch, want.microbatch);
  EXPECT_EQ(got.phase, want.phase);
  EXPECT_EQ(got.param, want.param);
  EXPECT_EQ(got.module, want.module);
  EXPECT_EQ(got.tp, want.tp);
  EXPECT_EQ(got.pp, want.pp);
  EXPECT_EQ(got.dp, want.dp);
  EXPECT_EQ(got.partitionDim, want.partitionDim);
  EXPECT_EQ(got.partitionOffset, want.partitionOffset);
  EXPECT_EQ(got.shape, want.shape);
  EXPECT_EQ(got.fullShape, want.fullShape);
  EXPECT_EQ(got.dtype, want.dtype);
  const bool stats = level >= RecordLevel::Stats;
  EXPECT_EQ(got.norm, stats ? want.norm : 0.0);
  EXPECT_EQ(got.checksum, stats ? want.checksum : 0u);
  expectStats(got.hasStats, got.stats, stats && want.hasStats, want.stats);
  EXPECT_EQ(got.payload.vec(),
            level == RecordLevel::Full ? want.payload.vec() : std::vector<uint8_t>{});
}

void expectRunInfo(const events::RunInfo& got, const events::RunInfo& want) {
  EXPECT_EQ(got.runId, want.runId);
  EXPECT_EQ(got.configText, want.configText);
  EXPECT_EQ(got.configHash, want.configHash);
  EXPECT_EQ(got.worldSize, want.worldSize);
  EXPECT_EQ(got.iterations, want.iterations);
  EXPECT_EQ(got.microbatches, want.microbatches);
  EXPECT_EQ(got.level, want.level);
  EXPECT_EQ(got.versionStagescope, want.versionStagescope);
  EXPECT_EQ(got.versionTorch, want.versionTorch);
  EXPECT_EQ(got.versionSqlite, want.versionSqlite);
  EXPECT_EQ(got.compiler, want.compiler);
  EXPECT_EQ(got.startUnixMs, want.startUnixMs);
  EXPECT_EQ(got.endUnixMs, want.endUnixMs);
  EXPECT_EQ(got.status, want.status);
  EXPECT_EQ(got.statusReason, want.statusReason);
  EXPECT_EQ(got.checksumFunction, want.checksumFunction);
  EXPECT_EQ(got.recordFilter.iterations, want.recordFilter.iterations);
  EXPECT_EQ(got.recordFilter.modules, want.recordFilter.modules);
  EXPECT_EQ(got.recordFilter.ranks, want.recordFilter.ranks);
  const auto& gs = got.settings;
  const auto& ws = want.settings;
  EXPECT_EQ(gs.recorded, ws.recorded);
  EXPECT_EQ(gs.seed, ws.seed);
  EXPECT_EQ(gs.microBatchSize, ws.microBatchSize);
  EXPECT_EQ(gs.dtype, ws.dtype);
  EXPECT_EQ(gs.forwardOnly, ws.forwardOnly);
  EXPECT_EQ(gs.lossScale, ws.lossScale);
  EXPECT_EQ(gs.optimizer.kind, ws.optimizer.kind);
  EXPECT_EQ(gs.optimizer.lr, ws.optimizer.lr);
  EXPECT_EQ(gs.optimizer.momentum, ws.optimizer.momentum);
  EXPECT_EQ(gs.optimizer.beta1, ws.optimizer.beta1);
  EXPECT_EQ(gs.optimizer.beta2, ws.optimizer.beta2);
  EXPECT_EQ(gs.optimizer.eps, ws.optimizer.eps);
  EXPECT_EQ(gs.optimizer.weightDecay, ws.optimizer.weightDecay);
  ASSERT_EQ(gs.modules.size(), ws.modules.size());
  for (size_t i = 0; i < ws.modules.size(); ++i) {
    EXPECT_EQ(gs.modules[i].name, ws.modules[i].name);
    EXPECT_EQ(gs.modules[i].kind, ws.modules[i].kind);
    EXPECT_EQ(gs.modules[i].dp, ws.modules[i].dp);
    EXPECT_EQ(gs.modules[i].patches, ws.modules[i].patches);
    EXPECT_EQ(gs.modules[i].patchDim, ws.modules[i].patchDim);
    EXPECT_EQ(gs.modules[i].textLen, ws.modules[i].textLen);
    EXPECT_EQ(gs.modules[i].vocab, ws.modules[i].vocab);
  }
  ASSERT_EQ(got.modules.size(), want.modules.size());
  for (size_t i = 0; i < want.modules.size(); ++i) {
    const auto& g = got.modules[i];
    const auto& w = want.modules[i];
    EXPECT_EQ(g.name, w.name);
    EXPECT_EQ(g.kind, w.kind);
    EXPECT_EQ(g.tp, w.tp);
    EXPECT_EQ(g.cp, w.cp);
    EXPECT_EQ(g.pp, w.pp);
    EXPECT_EQ(g.dp, w.dp);
    EXPECT_EQ(g.offset, w.offset);
    EXPECT_EQ(g.layers, w.layers);
    EXPECT_EQ(g.downstream, w.downstream);
  }
}

class RoundTrip : public ::testing::TestWithParam<RecordLevel> {};

TEST_P(RoundTrip, EveryRecordKindAndField) {
  const RecordLevel level = GetParam();
  TempDir dir;
  const std::string run = dir.file("run.db");
  const events::RunInfo info = sampleRun(2, level);
  createRunFile(run, info);

  const auto send = sampleTransfer(events::Side::Send, 0, 1, 1, 2);
  const auto recv = sampleTransfer(events::Side::Recv, 0, 1, 1, 2);
  const auto grad = sampleGradient(0, 1);
  const auto diag = sampleDiagnosis(0);
  // A kind this build does not know (a newer writer's) comes back as its text (longer than a
  // string's inline buffer: a text bound from a temporary would come back as garbage).
  auto future = sampleDiagnosis(1);
  future.kind = events::DiagnosisKind::Other;
  future.otherKind = "gpu_xid_error_reported";
  future.timeNs = diag.timeNs + 1;
  const auto input = sampleInput(1, 1, 3);
  {
    auto w0 = ShardWriter::open(shardPathFor(run, 0), level, 0);
    EXPECT_EQ(w0->level(), level);
    w0->run(info);
    w0->rank(sampleRank(0));
    w0->planned(sampleAction(0, 0, 0));
    w0->planned(sampleAction(0, 0, 1));
    w0->action(sampleAction(0, 0, 0));
    w0->action(sampleAction(0, 0, 1));
    w0->transfer(send);
    w0->gradient(grad);
    w0->diagnosis(diag);
    w0->close();
    auto w1 = ShardWriter::open(shardPathFor(run, 1), level, 1);
    w1->rank(sampleRank(1));
    w1->action(sampleAction(1, 0, 0));
    w1->transfer(recv);
    w1->loss(sampleLoss(1, 1, 1));
    w1->loss(sampleLoss(1, 1, 0));
    w1->input(input);
    w1->diagnosis(future);
    w1->close();
  }
  const MergeResult merged = mergeShards(run, findShards(run));
  EXPECT_EQ(merged.merged, 2);
  EXPECT_TRUE(merged.ok());

  LoadOptions opts;
  opts.payloads = true;
  const model::RunModel m = loadRun(run, opts);
  EXPECT_EQ(m.schemaVersion, kSchemaVersion);
  EXPECT_FALSE(m.partial) << (m.notes.empty() ? "" : m.notes.front());
  expectRunInfo(m.info, info);

  if (level == RecordLevel::Off) {
    EXPECT_TRUE(m.ranks.empty());
    EXPECT_EQ(m.eventCount(), 0u);
    EXPECT_TRUE(m.diagnoses.empty());
    EXPECT_TRUE(m.inputs.empty());
    return;
  }
  ASSERT_EQ(m.ranks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const auto want = sampleRank(r);
    const auto* got = m.rankInfo(r);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->module, want.module);
    EXPECT_EQ(got->tp, want.tp);
    EXPECT_EQ(got->pp, want.pp);
    EXPECT_EQ(got->globalStage, want.globalStage);
    EXPECT_EQ(got->totalStages, want.totalStages);
    EXPECT_EQ(got->warmup, want.warmup);
    EXPECT_EQ(got->host, want.host);
    EXPECT_EQ(got->device, want.device);
    EXPECT_EQ(got->pid, want.pid);
    EXPECT_EQ(got->clockOffsetNs, want.clockOffsetNs);
  }
  EXPECT_EQ(m.rankInfo(7), nullptr);

  ASSERT_EQ(m.plan.size(), 2u);
  ASSERT_EQ(m.plan[0].size(), 2u);
  expectAction(m.plan[0][1], sampleAction(0, 0, 1), false);
  ASSERT_EQ(m.actions.size(), 2u);
  ASSERT_EQ(m.actions[0].size(), 2u);
  ASSERT_EQ(m.actions[1].size(), 1u);
  expectAction(m.actions[0][0], sampleAction(0, 0, 0), true);
  expectAction(m.actions[0][1], sampleAction(0, 0, 1), true);
  expectAction(m.actions[1][0], sampleAction(1, 0, 0), true);
  EXPECT_EQ(m.minTimeNs, 0);
  EXPECT_EQ(m.maxTimeNs, 1500);

  ASSERT_EQ(m.transfers.size(), 2u);
  expectTransfer(m.transfers[0], send, level);
  expectTransfer(m.transfers[1], recv, level);
  ASSERT_EQ(m.transferIds.size(), 2u);
  ASSERT_EQ(m.pairs.size(), 1u);
  EXPECT_EQ(m.pairs[0].send, 0);
  EXPECT_EQ(m.pairs[0].recv, 1);
  EXPECT_TRUE(m.pairs[0].ok());
  const auto payload = loadTransferPayload(run, m.transferIds[0]);
  EXPECT_EQ(payload, level == RecordLevel::Full ? send.payload : std::vector<uint8_t>{});

  ASSERT_EQ(m.gradients.size(), 1u);
  expectGradient(m.gradients[0], grad, level);

  ASSERT_EQ(m.losses.size(), 2u);
  EXPECT_EQ(m.losses[0].microbatch, 0);  // sorted by (iteration, microbatch, dp, rank)
  EXPECT_EQ(m.losses[1].loss, 3.5);
  EXPECT_EQ(m.losses[1].rank, 1);
  EXPECT_EQ(m.losses[1].iteration, 1);
  EXPECT_EQ(m.losses[1].dp, 0);

  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].rank, input.rank);
  EXPECT_EQ(m.inputs[0].iteration, input.iteration);
  EXPECT_EQ(m.inputs[0].microbatch, input.microbatch);
  EXPECT_EQ(m.inputs[0].module, input.module);
  EXPECT_EQ(m.inputs[0].name, input.name);
  EXPECT_EQ(m.inputs[0].shape, input.shape);
  EXPECT_EQ(m.inputs[0].dtype, input.dtype);
  EXPECT_EQ(m.inputs[0].payload,
            level == RecordLevel::Full ? input.payload : std::vector<uint8_t>{});

  ASSERT_EQ(m.diagnoses.size(), 2u);
  EXPECT_EQ(m.diagnoses[1].kind, events::DiagnosisKind::Other);
  EXPECT_EQ(m.diagnoses[1].kindName(), "gpu_xid_error_reported");
  EXPECT_EQ(m.diagnoses[0].kindName(), "hang");
  EXPECT_EQ(m.diagnoses[0].rank, diag.rank);
  EXPECT_EQ(m.diagnoses[0].kind, diag.kind);
  EXPECT_EQ(m.diagnoses[0].iteration, diag.iteration);
  EXPECT_EQ(m.diagnoses[0].actionSeq, diag.actionSeq);
  EXPECT_EQ(m.diagnoses[0].waitsOnRank, diag.waitsOnRank);
  EXPECT_EQ(m.diagnoses[0].message, diag.message);
  EXPECT_EQ(m.diagnoses[0].timeNs, diag.timeNs);
  EXPECT_EQ(m.eventCount(), 3u + 2u + 1u + 2u);
}

INSTANTIATE_TEST_SUITE_P(Levels, RoundTrip,
                         ::testing::Values(RecordLevel::Off, RecordLevel::Meta, RecordLevel::Stats,
                                           RecordLevel::Full),
                         [](const auto& info) {
                           return std::string(events::toString(info.param));
                         });

TEST(RoundTrip, PayloadsAreNotLoadedUnlessAsked) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(1, RecordLevel::Full));
  {
    auto w = ShardWriter::open(shardPathFor(run, 0), RecordLevel::Full, 0);
    w->transfer(sampleTransfer(events::Side::Send, 0, 1, 0, 0));
  }  // destructor closes
  mergeShards(run, findShards(run));
  const model::RunModel m = loadRun(run);
  ASSERT_EQ(m.transfers.size(), 1u);
  EXPECT_TRUE(m.transfers[0].payload.empty());
  EXPECT_EQ(loadTransferPayload(run, m.transferIds[0]),
            sampleTransfer(events::Side::Send, 0, 1, 0, 0).payload);
  EXPECT_TRUE(loadTransferPayload(run, 999).empty());
}

// A planted fault comes back as the record it was written as; a file written before the
// `injected_faults` table existed gives the same record from its fault_injected sentence.
TEST(RoundTrip, InjectedFaultsAsRecordsAndFromTheSentencesOfOlderFiles) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(2, RecordLevel::Meta));
  events::InjectedFaultRecord f;
  f.rank = 1;
  f.iteration = 2;
  f.actionSeq = 5;
  f.peer = 0;
  f.kinds = {"delay", "drop"};
  f.delaySeconds = 8;
  f.timeNs = 1000;
  events::DiagnosisRecord d;
  d.rank = 1;
  d.kind = events::DiagnosisKind::FaultInjected;
  d.iteration = 2;
  d.actionSeq = 5;
  d.waitsOnRank = 0;
  d.message =
      "fault injection (delay 8 s,drop) on rank 1's send of the activation of "
      "microbatch 0 in iteration 2";
  d.timeNs = 1000;
  {
    auto w = ShardWriter::open(shardPathFor(run, 1), RecordLevel::Meta, 1);
    w->injectedFault(f);
    w->diagnosis(d);
  }
  ASSERT_TRUE(mergeShards(run, findShards(run)).ok());
  auto expectTheFault = [&](const model::RunModel& m) {
    ASSERT_EQ(m.injectedFaults.size(), 1u);
    const auto& got = m.injectedFaults[0];
    EXPECT_EQ(got.rank, 1);
    EXPECT_EQ(got.iteration, 2);
    EXPECT_EQ(got.actionSeq, 5);
    EXPECT_EQ(got.peer, 0);
    EXPECT_EQ(got.kinds, (std::vector<std::string>{"delay", "drop"}));
    EXPECT_DOUBLE_EQ(got.delaySeconds, 8);
  };
  expectTheFault(loadRun(run));
  {
    Db db(run, Db::Mode::ReadWrite);
    db.exec("DROP TABLE injected_faults");
  }
  expectTheFault(loadRun(run));
}

// A run's origin and a captured job's declared schedule come back as the rows they were written
// as, through the shards' merge; a file written before the run_origin and job_schedule tables
// existed gives the same from the comment lines of its config text.  An engine run whose config
// happens to begin with the captured line stays an engine run: the table decides, not the text.
TEST(RoundTrip, RunOriginAndJobScheduleAsRowsAndFromTheConfigTextOfOlderFiles) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  events::RunInfo info = sampleRun(2, RecordLevel::Meta);
  info.origin = events::RunOrigin::Captured;
  info.configText = std::string(events::kCapturedConfigLine) +
                    "\n# job schedule: rank=1 module=llm stage=1 global_stage=2 total_stages=3 "
                    "warmup=0\n# job schedule: rank=0 module=vision stage=0 global_stage=0 "
                    "total_stages=3 warmup=2\nmicrobatches = 4\n";
  info.jobSchedule = {{0, "vision", 0, 0, 3, 2}, {1, "llm", 1, 2, 3, 0}};
  events::RunInfo created = info;  // the run file's row: as the capture's rank 0 starts it
  created.jobSchedule.clear();
  createRunFile(run, created);
  {
    Db db(run, Db::Mode::ReadWrite);
    db.exec("DELETE FROM job_schedule");  // the shard's rows fill an empty table
  }
  {
    auto w = ShardWriter::open(shardPathFor(run, 1), RecordLevel::Meta, 1);
    w->run(info);
  }
  ASSERT_TRUE(mergeShards(run, findShards(run)).ok());
  auto expectTheSchedule = [&](const model::RunModel& m) {
    EXPECT_TRUE(m.info.captured());
    EXPECT_EQ(m.info.jobSchedule, info.jobSchedule);
  };
  expectTheSchedule(loadRun(run));
  {
    Db db(run, Db::Mode::ReadWrite);
    db.exec("DROP TABLE run_origin");
    db.exec("DROP TABLE job_schedule");
  }
  expectTheSchedule(loadRun(run));  // rank order, as the table's

  const std::string engine = dir.file("engine.db");
  events::RunInfo own = sampleRun(2, RecordLevel::Meta);
  own.configText = info.configText;  // a user's comment line, not a claim
  createRunFile(engine, own);
  const model::RunModel e = loadRun(engine);
  EXPECT_FALSE(e.info.captured());
  EXPECT_TRUE(e.info.jobSchedule.empty());
}

// `merge` judges a run's status from its plan, actions and diagnoses only (statusOnly): those
// come back whole, the bulky tables (transfers, gradients, losses, inputs) are not read.
TEST(RoundTrip, StatusOnlyReadsWhatTheStatusJudgementNeeds) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  const events::RunInfo info = sampleRun(2, RecordLevel::Stats);
  createRunFile(run, info);
  {
    auto w0 = ShardWriter::open(shardPathFor(run, 0), RecordLevel::Stats, 0);
    w0->run(info);
    w0->rank(sampleRank(0));
    w0->planned(sampleAction(0, 0, 0));
    w0->planned(sampleAction(0, 0, 1));
    w0->action(sampleAction(0, 0, 0));
    w0->transfer(sampleTransfer(events::Side::Send, 0, 1, 1, 2));
    w0->gradient(sampleGradient(0, 1));
    w0->diagnosis(sampleDiagnosis(0));
    w0->close();
    auto w1 = ShardWriter::open(shardPathFor(run, 1), RecordLevel::Stats, 1);
    w1->rank(sampleRank(1));
    w1->planned(sampleAction(1, 0, 0));
    w1->action(sampleAction(1, 0, 0));
    w1->transfer(sampleTransfer(events::Side::Recv, 0, 1, 1, 2));
    w1->loss(sampleLoss(1, 1, 0));
    w1->input(sampleInput(1, 1, 3));
    w1->close();
  }
  ASSERT_TRUE(mergeShards(run, findShards(run)).ok());
  const model::RunModel all = loadRun(run);
  LoadOptions opts;
  opts.statusOnly = true;
  const model::RunModel m = loadRun(run, opts);
  expectRunInfo(m.info, info);
  ASSERT_EQ(m.ranks.size(), all.ranks.size());
  ASSERT_EQ(m.plan.size(), 2u);
  ASSERT_EQ(m.plan[0].size(), 2u);
  ASSERT_EQ(m.plan[1].size(), 1u);
  expectAction(m.plan[0][1], all.plan[0][1], false);
  ASSERT_EQ(m.actions.size(), 2u);
  ASSERT_EQ(m.actions[0].size(), 1u);
  expectAction(m.actions[1][0], all.actions[1][0], true);
  ASSERT_EQ(m.diagnoses.size(), 1u);
  EXPECT_EQ(m.diagnoses[0].message, all.diagnoses[0].message);
  // What the full load holds and the status judgement does not read.
  ASSERT_EQ(all.transfers.size(), 2u);
  ASSERT_EQ(all.gradients.size(), 1u);
  ASSERT_EQ(all.losses.size(), 1u);
  ASSERT_EQ(all.inputs.size(), 1u);
  EXPECT_TRUE(m.transfers.empty());
  EXPECT_TRUE(m.pairs.empty());
  EXPECT_TRUE(m.gradients.empty());
  EXPECT_TRUE(m.losses.empty());
  EXPECT_TRUE(m.inputs.empty());
}

TEST(RoundTrip, StatusUpdateAndProgress) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(1, RecordLevel::Stats));
  EXPECT_THROW(createRunFile(run, sampleRun(1, RecordLevel::Stats)), std::runtime_error);
  writeActionsShard(shardPathFor(run, 0), 0, 200000);
  mergeShards(run, findShards(run));
  updateRunStatus(run, events::RunStatus::Hung, "rank 0 waits for rank 1", 1700000001234);
  std::vector<float> seen;
  const model::RunModel m = loadRun(run, {}, [&](float f) { seen.push_back(f); });
  EXPECT_EQ(m.info.status, events::RunStatus::Hung);
  EXPECT_EQ(m.info.statusReason, "rank 0 waits for rank 1");
  EXPECT_EQ(m.info.endUnixMs, 1700000001234);
  ASSERT_GE(seen.size(), 2u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen.back(), 1.0f);
}

TEST(RoundTrip, ClockOffsetsAlignRanks) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(1, RecordLevel::Stats));
  {
    auto w = ShardWriter::open(shardPathFor(run, 0), RecordLevel::Stats, 0);
    auto r = sampleRank(0);
    r.clockOffsetNs = 400;
    w->rank(r);
    w->action(sampleAction(0, 0, 1));  // 1000 .. 1500
  }
  mergeShards(run, findShards(run));
  const model::RunModel aligned = loadRun(run);
  EXPECT_EQ(aligned.actions[0][0].startNs, 600);
  EXPECT_EQ(aligned.minTimeNs, 600);
  EXPECT_EQ(aligned.maxTimeNs, 1100);
  LoadOptions raw;
  raw.applyClockOffsets = false;
  EXPECT_EQ(loadRun(run, raw).actions[0][0].startNs, 1000);
}

}  // namespace
}  // namespace stagescope::storage::test
