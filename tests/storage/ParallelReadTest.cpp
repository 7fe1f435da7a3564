// Reading the gradients table on two threads and the transfers on a thread of their own
// (LoadOptions::parallelFromRows): the model, and the error a bad file gives, must be those of
// a serial read of the same file.  Each test loads
// one file both ways (parallelFromRows 0: serial; 1: always two threads) and compares.
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

// A merged run file of two ranks with `perRank` gradients each (distinct checksums in write
// order), as many transfers, some actions and losses, at level full (payloads present).
std::string makeRun(const TempDir& dir, int perRank) {
  const std::string run = dir.file("run.db");
  const auto level = events::RecordLevel::Full;
  const events::RunInfo info = sampleRun(2, level);
  createRunFile(run, info);
  for (int rank = 0; rank < 2; ++rank) {
    auto w = ShardWriter::open(shardPathFor(run, rank), level, rank);
    if (rank == 0) w->run(info);
    w->rank(sampleRank(rank));
    for (int i = 0; i < 50; ++i) w->action(sampleAction(rank, i / 10, i % 10));
    for (int i = 0; i < perRank; ++i) {
      events::GradientRecord g = sampleGradient(rank, i % 7);
      g.microbatch = i % 5;
      g.param = "llm.layers." + std::to_string(i % 11) + ".w";
      g.checksum = static_cast<uint64_t>(rank * perRank + i + 1);
      g.shape = {i % 4, 1};  // payloads of 0 to 3 float32 values
      g.fullShape = {32, 1};
      g.payload = std::vector<uint8_t>(static_cast<size_t>(i % 4) * 4, static_cast<uint8_t>(i));
      w->gradient(g);
    }
    for (int i = 0; i < perRank; ++i) {
      const auto side = rank == 0 ? events::Side::Send : events::Side::Recv;
      events::TransferRecord t = sampleTransfer(side, 0, 1, i % 7, i % 5 - 1);
      t.checksum = static_cast<uint64_t>(rank * perRank + i + 1);
      w->transfer(t);
    }
    for (int i = 0; i < 20; ++i) w->loss(sampleLoss(rank, i / 4, i % 4));
    w->close();
  }
  EXPECT_TRUE(mergeShards(run, findShards(run)).ok());
  return run;
}

model::RunModel load(const std::string& path, int64_t parallelFromRows) {
  LoadOptions opts;
  opts.payloads = true;
  opts.parallelFromRows = parallelFromRows;
  return loadRun(path, opts);
}

auto fields(const events::GradientRecord& g) {
  return std::make_tuple(g.rank, g.iteration, g.microbatch, static_cast<int>(g.phase), g.hasStats,
                         g.param.str(), g.module.str(), g.tp, g.pp, g.dp, g.partitionDim,
                         g.partitionOffset, g.shape.vec(), g.fullShape.vec(), g.dtype.str(), g.norm,
                         g.checksum, g.stats.numel, g.payload.vec());
}

void expectSameGradients(const std::vector<events::GradientRecord>& a,
                         const std::vector<events::GradientRecord>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(fields(a[i]), fields(b[i]));
  }
}

auto fields(const events::TransferRecord& t) {
  return std::make_tuple(t.rank, static_cast<int>(t.side), t.srcRank, t.dstRank, t.edge.str(),
                         t.iteration, t.microbatch, t.actionSeq, t.shape.vec(), t.bytes, t.checksum,
                         t.stats.l2, t.startNs, t.endNs, t.payload);
}

void expectSameModel(const std::string& path) {
  const model::RunModel serial = load(path, 0);
  const model::RunModel parallel = load(path, 1);
  ASSERT_FALSE(serial.gradients.empty());
  expectSameGradients(parallel.gradients, serial.gradients);
  expectSameGradients(parallel.referenceGradients, serial.referenceGradients);
  EXPECT_EQ(parallel.losses.size(), serial.losses.size());
  EXPECT_EQ(parallel.actions.size(), serial.actions.size());
  ASSERT_FALSE(serial.transfers.empty());
  ASSERT_EQ(parallel.transfers.size(), serial.transfers.size());
  for (size_t i = 0; i < serial.transfers.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(fields(parallel.transfers[i]), fields(serial.transfers[i]));
  }
  EXPECT_EQ(parallel.transferIds, serial.transferIds);
  EXPECT_EQ(parallel.pairs.size(), serial.pairs.size());
}

// The error message of loading `path` with `parallelFromRows` ("" when it loads).
std::string errorOf(const std::string& path, int64_t parallelFromRows) {
  try {
    load(path, parallelFromRows);
  } catch (const RunFileError& e) {
    return e.what();
  }
  return "";
}

TEST(ParallelRead, GivesTheSerialModel) {
  TempDir dir;
  const std::string run = makeRun(dir, 1500);
  expectSameModel(run);
}

// Rowids with holes: the second thread's share is counted, not derived from the rowid range;
// so are the rows of each transfer chunk (some chunks left with none).
TEST(ParallelRead, RowidsWithHolesGiveTheSerialModel) {
  TempDir dir;
  const std::string run = makeRun(dir, 1500);
  execSql(run, "DELETE FROM gradients_rows WHERE id % 7 = 3 OR id BETWEEN 1400 AND 1700");
  execSql(run, "DELETE FROM transfers_rows WHERE id % 5 = 2 OR id BETWEEN 900 AND 1300");
  expectSameModel(run);
}

// Rows land by iteration (counted by the iteration index); a NULL iteration reads as 0.
TEST(ParallelRead, NullIterationsGiveTheSerialModel) {
  TempDir dir;
  const std::string run = makeRun(dir, 1500);
  execSql(run, "UPDATE gradients_rows SET iteration = NULL WHERE id % 9 = 4");
  expectSameModel(run);
}

// Without the iteration index the rows land in one bucket per thread: the same model.
TEST(ParallelRead, WithoutTheIterationIndexGivesTheSerialModel) {
  TempDir dir;
  const std::string run = makeRun(dir, 1500);
  execSql(run, "DROP INDEX gradients_by_param");
  expectSameModel(run);
}

// Reference rows inside the gradients table (as format 1 kept them) go to referenceGradients
// from either thread, in file order; the slots they leave are closed.
TEST(ParallelRead, ReferenceRowsInTheGradientsTableGiveTheSerialModel) {
  TempDir dir;
  const std::string run = makeRun(dir, 1500);
  execSql(run, "UPDATE gradients SET phase = 'reference', rank = -1 WHERE id % 5 = 1");
  const model::RunModel serial = load(run, 0);
  ASSERT_GT(serial.referenceGradients.size(), 500u);
  expectSameModel(run);
}

// Copies `from` to `name` in `dir` with `sql` planted; expects a serial read of the copy to
// fail naming `expected` and a parallel read to fail with the same message.  The copy's path.
std::string expectSerialError(const TempDir& dir, const std::string& from, const std::string& name,
                              const std::string& sql, const std::string& expected) {
  const std::string path = dir.file(name);
  std::filesystem::copy_file(from, path);
  execSql(path, sql);
  const std::string serial = errorOf(path, 0);
  EXPECT_NE(serial.find(expected), std::string::npos) << name << ": " << serial;
  EXPECT_EQ(errorOf(path, 1), serial) << name;
  return path;
}

// One clear error, and the one a serial read reports first: a bad row only in the second
// thread's range; bad rows in both ranges (the first range's wins); a bad row in a table read
// before the gradients and one in the second range (the earlier table's wins).  The transfers,
// read in chunks by a thread of their own and this one: a bad transfer alone; a bad action (read
// before them) and a bad transfer; a bad transfer and a bad gradient (read after them); bad
// transfers in chunks far apart (the earlier one's wins, whichever thread read which chunk:
// repeated, as the threads take chunks in a different order each time).
TEST(ParallelRead, ReportsTheErrorOfASerialRead) {
  TempDir dir;
  const std::string run = makeRun(dir, 1500);
  const std::string late = expectSerialError(
      dir, run, "late.db", "UPDATE gradients_rows SET tp = 99999 WHERE id = 2900", "tp = 99999");
  expectSerialError(dir, late, "both.db", "UPDATE gradients_rows SET iteration = -5 WHERE id = 3",
                    "iteration = -5");
  expectSerialError(dir, late, "earlier.db", "UPDATE actions_rows SET seq = -7 WHERE id = 10",
                    "seq = -7");
  const std::string transfer =
      expectSerialError(dir, run, "transfer.db",
                        "UPDATE transfers_rows SET src_rank = -3 WHERE id = 2000", "src_rank = -3");
  expectSerialError(dir, transfer, "action-first.db",
                    "UPDATE actions_rows SET seq = -7 WHERE id = 10", "seq = -7");
  expectSerialError(dir, transfer, "gradient-after.db",
                    "UPDATE gradients_rows SET tp = 99999 WHERE id = 2900", "src_rank = -3");
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    const std::string n = std::to_string(i);
    expectSerialError(
        dir, transfer, "two-transfers-" + n + ".db",
        "UPDATE transfers_rows SET dst_rank = -4 WHERE id = " + std::to_string(150 + i),
        "dst_rank = -4");
    expectSerialError(
        dir, transfer, "last-transfer-" + n + ".db",
        "UPDATE transfers_rows SET dst_rank = -4 WHERE id = " + std::to_string(2990 + i),
        "src_rank = -3");
  }
}

}  // namespace
}  // namespace stagescope::storage::test
