// Merging many shards, re-merging, missing/corrupt shards, send/recv pairing.
#include <gtest/gtest.h>

#include <filesystem>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

namespace stagescope::storage::test {
namespace {

using events::RecordLevel;
using events::Side;

bool hasNote(const model::RunModel& m, const std::string& part) {
  for (const auto& n : m.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

TEST(Merge, ShardPathsFollowTheNamingConvention) {
  TempDir dir;
  const std::string run = dir.file("r.db");
  EXPECT_EQ(shardPathFor(run, 12), run + ".rank12.shard");
  for (int r : {10, 2, 0}) writeText(shardPathFor(run, r), "x");
  writeText(dir.file("r.db.rankX.shard"), "x");
  writeText(dir.file("other.db.rank1.shard"), "x");
  writeText(dir.file("r.db.rank3.shard-wal"), "x");
  const auto found = findShards(run);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0], shardPathFor(run, 0));
  EXPECT_EQ(found[1], shardPathFor(run, 2));
  EXPECT_EQ(found[2], shardPathFor(run, 10));
}

// `merge RUN S S` (and S under a second name): the file is merged once, without waiting on
// its own lock, and the merge is ok (it used to wait 20 s on "database is locked" and fail).
TEST(Merge, TheSameShardTwiceIsMergedOnce) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(2, RecordLevel::Stats));
  for (int r = 0; r < 2; ++r) {
    auto w = ShardWriter::open(shardPathFor(run, r), RecordLevel::Stats, r);
    w->rank(sampleRank(r));
    for (int i = 0; i < 10; ++i) w->action(sampleAction(r, 0, i));
  }
  const std::string s0 = shardPathFor(run, 0);
  const std::string alias = dir.file("./run.db.rank0.shard");
  const MergeResult res = mergeShards(run, {s0, shardPathFor(run, 1), s0, alias});
  EXPECT_TRUE(res.ok());
  EXPECT_EQ(res.merged, 2);
  EXPECT_EQ(res.failed, 0);
  ASSERT_EQ(res.notes.size(), 2u);
  EXPECT_NE(res.notes[0].find("given more than once; merged once"), std::string::npos);
  const model::RunModel m = loadRun(run);
  ASSERT_EQ(m.actions.size(), 2u);
  EXPECT_EQ(m.actions[0].size(), 10u);
}

// `cp a.db b.db` and each a.db.rank<i>.shard to b.db.rank<i>.shard, then `merge b.db`: the
// same rows, not every row twice (104 actions became 208, and check and compare still passed).
TEST(Merge, ACopiedRunWithItsShardsMergesToTheSameRows) {
  TempDir dir;
  const std::string a = dir.file("a.db"), b = dir.file("b.db");
  createRunFile(a, sampleRun(2, RecordLevel::Stats));
  for (int r = 0; r < 2; ++r) {
    auto w = ShardWriter::open(shardPathFor(a, r), RecordLevel::Stats, r);
    w->rank(sampleRank(r));
    for (int i = 0; i < 13; ++i) w->action(sampleAction(r, 0, i));
  }
  ASSERT_TRUE(mergeShards(a, findShards(a)).ok());
  std::filesystem::copy_file(a, b);
  for (int r = 0; r < 2; ++r) std::filesystem::copy_file(shardPathFor(a, r), shardPathFor(b, r));
  const MergeResult res = mergeShards(b, findShards(b));
  EXPECT_TRUE(res.ok());
  EXPECT_EQ(res.merged, 2);
  const model::RunModel m = loadRun(b);
  ASSERT_EQ(m.actions.size(), 2u);
  EXPECT_EQ(m.actions[0].size(), 13u);
  EXPECT_EQ(m.actions[1].size(), 13u);
  EXPECT_FALSE(m.partial) << (m.notes.empty() ? "" : m.notes.front());
  // A shard of another name merged explicitly, twice, keeps replacing its own rows.
  const std::string c = dir.file("c.db");
  createRunFile(c, sampleRun(2, RecordLevel::Stats));
  for (int k = 0; k < 2; ++k) ASSERT_TRUE(mergeShards(c, {shardPathFor(a, 0)}).ok());
  EXPECT_EQ(loadRun(c).actions[0].size(), 13u);
}

// 12 shards: more than one ATTACH group of 9.
TEST(Merge, TwelveShardsInAttachGroups) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  const int world = 12;
  createRunFile(run, sampleRun(world, RecordLevel::Stats));
  for (int r = 0; r < world; ++r) {
    auto w = ShardWriter::open(shardPathFor(run, r), RecordLevel::Stats, r);
    w->rank(sampleRank(r));
    for (int i = 0; i < 100 + r; ++i) w->action(sampleAction(r, i / 10, i % 10));
    // Ring: every rank sends to the next and receives from the previous.
    w->transfer(sampleTransfer(Side::Send, r, (r + 1) % world, 0, 0));
    w->transfer(sampleTransfer(Side::Recv, (r + world - 1) % world, r, 0, 0));
  }
  // Progress: one step per shard over the two attach groups, then the indexes and the
  // overview, each reported once, in order.
  std::vector<std::pair<size_t, size_t>> steps;
  const MergeResult res = mergeShards(
      run, findShards(run), [&](size_t done, size_t total) { steps.emplace_back(done, total); });
  EXPECT_EQ(res.merged, world);
  EXPECT_TRUE(res.ok());
  EXPECT_EQ(res.shards[11].rank, 11);
  ASSERT_EQ(steps.size(), static_cast<size_t>(world + 2));
  for (size_t i = 0; i < steps.size(); ++i)
    EXPECT_EQ(steps[i], std::make_pair(i + 1, static_cast<size_t>(world + 2)));

  const model::RunModel m = loadRun(run);
  EXPECT_FALSE(m.partial);
  ASSERT_EQ(m.actions.size(), static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(m.actions[r].size(), static_cast<size_t>(100 + r));
    for (size_t i = 1; i < m.actions[r].size(); ++i) {
      const auto& a = m.actions[r][i - 1];
      const auto& b = m.actions[r][i];
      EXPECT_LT(std::tie(a.iteration, a.seq), std::tie(b.iteration, b.seq));
    }
  }
  ASSERT_EQ(m.transfers.size(), static_cast<size_t>(2 * world));
  ASSERT_EQ(m.pairs.size(), static_cast<size_t>(world));
  for (const auto& p : m.pairs) {
    ASSERT_TRUE(p.complete());
    EXPECT_EQ(m.transfers[p.send].side, Side::Send);
    EXPECT_EQ(m.transfers[p.recv].side, Side::Recv);
    EXPECT_EQ(m.transfers[p.send].srcRank, m.transfers[p.recv].srcRank);
    EXPECT_EQ(m.transfers[p.send].dstRank, m.transfers[p.recv].dstRank);
    EXPECT_TRUE(p.ok());
  }
  // Re-running the whole merge replaces rows instead of doubling them.
  EXPECT_EQ(mergeShards(run, findShards(run)).merged, world);
  EXPECT_EQ(loadRun(run).eventCount(), m.eventCount());
}

TEST(Merge, PairingDetectsMismatchesAndMissingSides) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(2, RecordLevel::Stats));
  {
    auto w0 = ShardWriter::open(shardPathFor(run, 0), RecordLevel::Stats, 0);
    auto w1 = ShardWriter::open(shardPathFor(run, 1), RecordLevel::Stats, 1);
    // mb 0: good.  mb 1: checksum differs.  mb 2: shape differs.  mb 3: never received.
    // mb 4: received but never sent.  mb 5: receiver recorded no checksum (not a mismatch).
    for (int mb = 0; mb < 6; ++mb) {
      auto s = sampleTransfer(Side::Send, 0, 1, 0, mb);
      auto r = sampleTransfer(Side::Recv, 0, 1, 0, mb);
      if (mb == 1) r.checksum ^= 1;
      if (mb == 2) r.shape = {4, 2, 16};
      if (mb == 5) r.checksum = 0;
      if (mb != 4) w0->transfer(s);
      if (mb != 3) w1->transfer(r);
    }
  }
  mergeShards(run, findShards(run));
  const model::RunModel m = loadRun(run);
  ASSERT_EQ(m.pairs.size(), 6u);
  auto mbOf = [&](const model::TransferPair& p) {
    return m.transfers[p.send >= 0 ? p.send : p.recv].microbatch;
  };
  for (const auto& p : m.pairs) {
    const int mb = mbOf(p);
    SCOPED_TRACE(mb);
    EXPECT_EQ(p.checksumMatches, mb != 1);
    EXPECT_EQ(p.shapeMatches, mb != 2);
    EXPECT_EQ(p.send >= 0, mb != 4);
    EXPECT_EQ(p.recv >= 0, mb != 3);
    EXPECT_EQ(p.ok(), mb == 0 || mb == 5);
  }
}

TEST(Merge, MissingAndCorruptShardsAreNotedNotFatal) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(3, RecordLevel::Stats));
  writeActionsShard(shardPathFor(run, 0), 0, 10);
  writeText(shardPathFor(run, 1), "this is not a database, just text that is long enough");
  const MergeResult res =
      mergeShards(run, {shardPathFor(run, 0), shardPathFor(run, 1), shardPathFor(run, 2)});
  EXPECT_EQ(res.merged, 1);
  EXPECT_EQ(res.failed, 1);
  EXPECT_EQ(res.missing, 1);
  EXPECT_EQ(res.notes.size(), 2u);
  EXPECT_EQ(res.shards[1].state, "failed");
  EXPECT_EQ(res.shards[2].state, "missing");

  const model::RunModel m = loadRun(run);
  EXPECT_TRUE(m.partial);
  EXPECT_EQ(m.actions[0].size(), 10u);
  EXPECT_TRUE(hasNote(m, "run.db.rank1.shard: failed"));
  EXPECT_TRUE(hasNote(m, "run.db.rank2.shard: missing"));
  EXPECT_TRUE(hasNote(m, "rank 2: no merged shard"));
}

TEST(Merge, ShardNeverMergedMakesTheRunPartial) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(2, RecordLevel::Stats));
  writeActionsShard(shardPathFor(run, 0), 0, 5);
  writeActionsShard(shardPathFor(run, 1), 1, 5);
  mergeShards(run, {shardPathFor(run, 0)});
  const model::RunModel m = loadRun(run);
  EXPECT_TRUE(m.partial);
  EXPECT_TRUE(hasNote(m, "run.db.rank1.shard exists but was never merged"));
  mergeShards(run, findShards(run));
  EXPECT_FALSE(loadRun(run).partial);
}

TEST(Merge, ReMergeAfterHalfMergeReplacesTheShardRows) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(2, RecordLevel::Stats));
  writeActionsShard(shardPathFor(run, 0), 0, 50);
  writeActionsShard(shardPathFor(run, 1), 1, 70);
  ASSERT_EQ(mergeShards(run, findShards(run)).merged, 2);
  {
    // Simulate a merger that died half way through shard 1: state 'merging' and stray rows.
    Db db(run, Db::Mode::ReadWrite);
    db.exec("UPDATE shards SET state='merging' WHERE rank=1");
    db.exec(
        "INSERT INTO actions(rank, iteration, seq, kind, microbatch, module, stage, peers, "
        "start_ns, end_ns, shard_id) SELECT rank, iteration, seq, kind, microbatch, module, "
        "stage, peers, start_ns, end_ns, shard_id FROM actions WHERE rank=1 LIMIT 30");
  }
  const model::RunModel half = loadRun(run);
  EXPECT_TRUE(half.partial);
  EXPECT_TRUE(hasNote(half, "merging"));
  EXPECT_EQ(half.actions[1].size(), 100u);

  const MergeResult again = mergeShards(run, findShards(run));
  EXPECT_EQ(again.merged, 2);
  const model::RunModel m = loadRun(run);
  EXPECT_FALSE(m.partial);
  EXPECT_EQ(m.actions[0].size(), 50u);
  EXPECT_EQ(m.actions[1].size(), 70u);
  Db db(run, Db::Mode::ReadOnly);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM shards WHERE state='merged'"), 2);
  EXPECT_EQ(db.queryInt("SELECT n_actions FROM shards WHERE rank=1"), 70);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM sqlite_schema WHERE type='index' AND "
                        "name='transfers_by_key'"),
            1);
}

TEST(Merge, ShardMergedEarlierKeepsItsRowsWhenItsFileIsGone) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(1, RecordLevel::Stats));
  writeActionsShard(shardPathFor(run, 0), 0, 5);
  mergeShards(run, findShards(run));
  const std::string shard = shardPathFor(run, 0);
  std::filesystem::remove(shard);
  EXPECT_EQ(mergeShards(run, {shard}).missing, 1);
  const model::RunModel m = loadRun(run);
  EXPECT_FALSE(m.partial);
  EXPECT_EQ(m.actions[0].size(), 5u);
}

}  // namespace
}  // namespace stagescope::storage::test
