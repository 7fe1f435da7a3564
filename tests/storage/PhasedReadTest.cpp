// A whole-model load in two phases (LoadOptions::parallelPhasesFromBytes: the timeline on the
// calling thread, the details on a second one, merged): the model, and the error a bad file
// gives, must be those of a serial read.  Each test loads one file both ways (0: serial; 1:
// always in phases) and compares every field the two halves fill.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <tuple>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

namespace stagescope::storage::test {
namespace {

// A merged run file of two ranks: plan and executed actions, messages both ways (paired),
// gradients, losses, inputs and a diagnosis, at level full.
std::string makeRun(const TempDir& dir, events::RunStatus status = events::RunStatus::Completed) {
  const std::string run = dir.file("run.db");
  const auto level = events::RecordLevel::Full;
  events::RunInfo info = sampleRun(2, level);
  info.status = status;
  createRunFile(run, info);
  for (int rank = 0; rank < 2; ++rank) {
    auto w = ShardWriter::open(shardPathFor(run, rank), level, rank);
    if (rank == 0) w->run(info);
    w->rank(sampleRank(rank));
    for (int i = 0; i < 40; ++i) {
      w->planned(sampleAction(rank, i / 10, i % 10));
      w->action(sampleAction(rank, i / 10, i % 10));
    }
    for (int it = 0; it < 4; ++it)
      for (int mb = 0; mb < 3; ++mb)
        w->transfer(
            sampleTransfer(rank == 0 ? events::Side::Send : events::Side::Recv, 0, 1, it, mb));
    for (int i = 0; i < 60; ++i) {
      events::GradientRecord g = sampleGradient(rank, i % 4);
      g.microbatch = i % 3;
      g.param = "llm.layers." + std::to_string(i % 5) + ".w";
      g.checksum = static_cast<uint64_t>(rank * 100 + i + 1);
      w->gradient(g);
    }
    for (int i = 0; i < 12; ++i) w->loss(sampleLoss(rank, i / 3, i % 3));
    w->input(sampleInput(rank, 0, 0));
    w->diagnosis(sampleDiagnosis(rank));
    w->close();
  }
  EXPECT_TRUE(mergeShards(run, findShards(run)).ok());
  return run;
}

model::RunModel load(const std::string& path, int64_t parallelPhasesFromBytes) {
  LoadOptions opts;
  opts.payloads = true;
  opts.parallelPhasesFromBytes = parallelPhasesFromBytes;
  return loadRun(path, opts);
}

auto actionFields(const events::ActionRecord& a) {
  return std::make_tuple(a.rank, a.iteration, a.seq, static_cast<int>(a.kind), a.microbatch,
                         a.stage, a.module.str(), a.peers.vec(), a.startNs, a.endNs);
}
auto transferFields(const events::TransferRecord& t) {
  return std::make_tuple(t.rank, static_cast<int>(t.side), t.srcRank, t.dstRank, t.edge.str(),
                         t.iteration, t.microbatch, t.actionSeq, t.shape.vec(), t.dtype.str(),
                         t.bytes, t.checksum, t.startNs, t.endNs, t.payload);
}
auto gradientFields(const events::GradientRecord& g) {
  return std::make_tuple(g.rank, g.iteration, g.microbatch, static_cast<int>(g.phase),
                         g.param.str(), g.module.str(), g.tp, g.pp, g.dp, g.shape.vec(),
                         g.dtype.str(), g.norm, g.checksum, g.payload.vec());
}
auto lossFields(const events::LossRecord& l) {
  return std::make_tuple(l.rank, l.iteration, l.microbatch, l.dp, l.loss);
}

template <typename T, typename F>
void expectSameList(const std::vector<T>& a, const std::vector<T>& b, F fields, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(fields(a[i]), fields(b[i])) << what << " " << i;
}

void expectSameModel(const std::string& path) {
  const model::RunModel serial = load(path, 0);
  const model::RunModel phased = load(path, 1);
  ASSERT_EQ(phased.plan.size(), serial.plan.size());
  ASSERT_EQ(phased.actions.size(), serial.actions.size());
  for (size_t r = 0; r < serial.plan.size(); ++r) {
    ASSERT_FALSE(serial.plan[r].empty());
    expectSameList(phased.plan[r], serial.plan[r], actionFields, "plan");
    expectSameList(phased.actions[r], serial.actions[r], actionFields, "actions");
  }
  ASSERT_FALSE(serial.transfers.empty());
  expectSameList(phased.transfers, serial.transfers, transferFields, "transfers");
  EXPECT_EQ(phased.transferIds, serial.transferIds);
  ASSERT_EQ(phased.pairs.size(), serial.pairs.size());
  for (size_t i = 0; i < serial.pairs.size(); ++i) {
    EXPECT_EQ(phased.pairs[i].send, serial.pairs[i].send);
    EXPECT_EQ(phased.pairs[i].recv, serial.pairs[i].recv);
  }
  ASSERT_FALSE(serial.gradients.empty());
  expectSameList(phased.gradients, serial.gradients, gradientFields, "gradients");
  expectSameList(phased.referenceGradients, serial.referenceGradients, gradientFields,
                 "reference gradients");
  expectSameList(phased.losses, serial.losses, lossFields, "losses");
  expectSameList(phased.referenceLosses, serial.referenceLosses, lossFields, "reference losses");
  EXPECT_EQ(phased.inputs.size(), serial.inputs.size());
  EXPECT_EQ(phased.diagnoses.size(), serial.diagnoses.size());
  EXPECT_EQ(phased.ranks.size(), serial.ranks.size());
  EXPECT_EQ(phased.gradientsNotLoaded, serial.gradientsNotLoaded);
  EXPECT_EQ(phased.partial, serial.partial);
  EXPECT_EQ(phased.notes, serial.notes);
  EXPECT_EQ(phased.info.runId, serial.info.runId);
  EXPECT_EQ(phased.minTimeNs, serial.minTimeNs);
  EXPECT_EQ(phased.maxTimeNs, serial.maxTimeNs);
  EXPECT_EQ(phased.clockOffsetsApplied, serial.clockOffsetsApplied);
}

std::string errorOf(const std::string& path, int64_t parallelPhasesFromBytes) {
  try {
    load(path, parallelPhasesFromBytes);
  } catch (const RunFileError& e) {
    return e.what();
  }
  return "";
}

TEST(PhasedRead, GivesTheSerialModel) {
  TempDir dir;
  expectSameModel(makeRun(dir));
}

TEST(PhasedRead, GivesTheSerialModelOfARunThatFailed) {
  TempDir dir;
  expectSameModel(makeRun(dir, events::RunStatus::Failed));
}

// Only the reduced gradients (compare): the count of those not read comes from the details.
TEST(PhasedRead, OnlyReducedGradientsCountsWhatWasNotRead) {
  TempDir dir;
  const std::string run = makeRun(dir);
  LoadOptions opts;
  opts.onlyReducedGradients = true;
  opts.parallelPhasesFromBytes = 0;
  const model::RunModel serial = loadRun(run, opts);
  opts.parallelPhasesFromBytes = 1;
  const model::RunModel phased = loadRun(run, opts);
  EXPECT_GT(serial.gradientsNotLoaded, 0u);
  EXPECT_EQ(phased.gradientsNotLoaded, serial.gradientsNotLoaded);
  expectSameList(phased.gradients, serial.gradients, gradientFields, "gradients");
}

// One clear error, and the one a serial read reports first: a bad row on the details' side
// (plan, read before the actions), on the timeline's side, and on both.
TEST(PhasedRead, ReportsTheErrorOfASerialRead) {
  TempDir dir;
  const std::string run = makeRun(dir);
  auto planted = [&](const std::string& name, const std::string& sql) {
    const std::string copy = dir.file(name);
    std::filesystem::copy_file(run, copy);
    execSql(copy, sql);
    return copy;
  };
  const std::string plan = planted("plan.db", "UPDATE plan_rows SET seq = -3 WHERE id = 5");
  const std::string actions =
      planted("actions.db", "UPDATE actions_rows SET seq = -7 WHERE id = 10");
  const std::string both = planted("both.db",
                                   "UPDATE plan_rows SET seq = -3 WHERE id = 5; "
                                   "UPDATE actions_rows SET seq = -7 WHERE id = 10; "
                                   "UPDATE gradients_rows SET tp = 99999 WHERE id = 7");
  for (const auto& [path, expected] :
       {std::pair{plan, "seq = -3"}, std::pair{actions, "seq = -7"}, std::pair{both, "seq = -3"}}) {
    const std::string serialError = errorOf(path, 0);
    EXPECT_NE(serialError.find(expected), std::string::npos) << serialError;
    EXPECT_EQ(errorOf(path, 1), serialError);
  }
}

}  // namespace
}  // namespace stagescope::storage::test
