// Format 3 packs plan, actions, transfers and gradients of the run file (docs/run-file.md
// "Packed tables"): text columns hold ids into `texts`, a gradient's norm equal to its stat_l2
// is stored once, and views with triggers keep the logical tables readable and writable.
// These tests check the packing against an independent reading of the same rows: the logical
// views, and the same file rewritten in the format-2 layout (plain tables, text columns).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/Schema.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

namespace stagescope::storage::test {
namespace {

using events::RecordLevel;

// Two ranks, every packed table with several distinct texts (edges, kinds, shapes, params),
// one gradient whose norm differs from its stat_l2 and one whose norm is NaN.
std::string writeSample(const TempDir& dir) {
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(2, RecordLevel::Stats));
  for (int r = 0; r < 2; ++r) {
    auto w = ShardWriter::open(shardPathFor(run, r), RecordLevel::Stats, r);
    w->rank(sampleRank(r));
    for (int seq = 0; seq < 6; ++seq) {
      auto a = sampleAction(r, 0, seq);
      a.kind = static_cast<events::ActionKind>(seq % 4);
      a.module = seq % 2 ? "vision" : "llm";
      w->planned(a);
      w->action(a);
    }
    const auto side = r == 0 ? events::Side::Send : events::Side::Recv;
    for (int mb = 0; mb < 3; ++mb) {
      auto t = sampleTransfer(side, 0, 1, 0, mb, mb == 2 ? "vision->llm" : "llm:pp0->pp1");
      t.shape = {4, mb + 1, 32};
      w->transfer(t);
    }
    auto g = sampleGradient(r, 0);
    g.param = "llm.layers." + std::to_string(r) + ".w";
    g.norm = g.stats.l2;  // the usual case: stored once
    w->gradient(g);
    auto d = sampleGradient(r, 1);
    d.norm = d.stats.l2 + 1.0;  // differs: stored
    w->gradient(d);
    auto n = sampleGradient(r, 2);
    n.norm = std::nan("");
    n.stats.l2 = std::nan("");  // NaN in both: stored once, reads back NaN
    w->gradient(n);
    w->close();
  }
  const auto merged = mergeShards(run, {shardPathFor(run, 0), shardPathFor(run, 1)});
  EXPECT_TRUE(merged.ok());
  return run;
}

void expectSameRows(const model::RunModel& a, const model::RunModel& b) {
  ASSERT_EQ(a.actions.size(), b.actions.size());
  for (size_t r = 0; r < a.actions.size(); ++r) {
    ASSERT_EQ(a.actions[r].size(), b.actions[r].size());
    for (size_t i = 0; i < a.actions[r].size(); ++i) {
      const auto &x = a.actions[r][i], &y = b.actions[r][i];
      EXPECT_EQ(x.kind, y.kind);
      EXPECT_EQ(x.module, y.module);
      EXPECT_EQ(x.peers, y.peers);
      EXPECT_EQ(x.startNs, y.startNs);
      EXPECT_EQ(x.endNs, y.endNs);
    }
  }
  ASSERT_EQ(a.plan.size(), b.plan.size());
  for (size_t r = 0; r < a.plan.size(); ++r) ASSERT_EQ(a.plan[r].size(), b.plan[r].size());
  ASSERT_EQ(a.transfers.size(), b.transfers.size());
  for (size_t i = 0; i < a.transfers.size(); ++i) {
    const auto &x = a.transfers[i], &y = b.transfers[i];
    EXPECT_EQ(x.side, y.side);
    EXPECT_EQ(x.edge, y.edge);
    EXPECT_EQ(x.edgeKind, y.edgeKind);
    EXPECT_EQ(x.role, y.role);
    EXPECT_EQ(x.direction, y.direction);
    EXPECT_EQ(x.shape, y.shape);
    EXPECT_EQ(x.dtype, y.dtype);
    EXPECT_EQ(x.checksum, y.checksum);
  }
  ASSERT_EQ(a.gradients.size(), b.gradients.size());
  for (size_t i = 0; i < a.gradients.size(); ++i) {
    const auto &x = a.gradients[i], &y = b.gradients[i];
    EXPECT_EQ(x.phase, y.phase);
    EXPECT_EQ(x.param, y.param);
    EXPECT_EQ(x.module, y.module);
    EXPECT_EQ(x.shape, y.shape);
    EXPECT_EQ(x.fullShape, y.fullShape);
    EXPECT_EQ(x.dtype, y.dtype);
    EXPECT_TRUE(x.norm == y.norm || (std::isnan(x.norm) && std::isnan(y.norm)))
        << x.param << ": " << x.norm << " vs " << y.norm;
  }
}

TEST(PackedFormat, TextIsStoredOnceAsAnIdAndNormOnlyWhenItDiffers) {
  TempDir dir;
  const std::string run = writeSample(dir);
  Db db(run, Db::Mode::ReadOnly);
  EXPECT_EQ(db.queryInt("PRAGMA user_version"), 3);
  // Every text once in the dictionary; stored columns are integers.
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM texts WHERE text = 'llm:pp0->pp1'"), 1);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM transfers_rows WHERE typeof(edge_id) != 'integer' "
                        "OR typeof(side_id) != 'integer' OR typeof(shape_id) != 'integer'"),
            0);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM actions_rows WHERE typeof(kind_id) != 'integer'"), 0);
  // norm: NULL where equal to stat_l2 (also both NaN), kept where different.
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM gradients_rows WHERE norm IS NULL"), 4);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM gradients_rows WHERE norm IS NOT NULL"), 2);
  // The views show the logical values.
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM transfers WHERE edge = 'vision->llm' AND "
                        "shape = '4,3,32'"),
            2);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM gradients WHERE norm = stat_l2 + 1.0"), 2);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM gradients WHERE norm = 'NaN'"), 2);
}

TEST(PackedFormat, ReadsTheSameAsTheFormat2LayoutOfTheSameRows) {
  TempDir dir;
  const std::string run = writeSample(dir);
  const model::RunModel packed = loadRun(run);
  EXPECT_EQ(packed.schemaVersion, 3);
  rewriteAsFormat2(run);
  const model::RunModel plain = loadRun(run);
  EXPECT_EQ(plain.schemaVersion, 2);
  ASSERT_EQ(packed.transfers.size(), 6u);
  ASSERT_EQ(packed.gradients.size(), 6u);
  expectSameRows(packed, plain);
}

TEST(PackedFormat, ViewsAcceptUpdatesInsertsAndDeletes) {
  TempDir dir;
  const std::string run = writeSample(dir);
  {
    Db db(run, Db::Mode::ReadWrite);
    db.exec("UPDATE transfers SET edge = 'new:edge', checksum = 7 WHERE microbatch = 0");
    db.exec("UPDATE gradients SET norm = norm * 2 WHERE iteration = 0");
    db.exec("DELETE FROM actions WHERE rank = 1 AND seq >= 3");
    db.exec(
        "INSERT INTO plan(rank, iteration, seq, kind, microbatch, module, stage, peers) "
        "VALUES (0, 0, 99, 'OPT_STEP', -1, 'brand_new', 0, '1,0')");
  }
  const model::RunModel m = loadRun(run);
  int renamed = 0;
  for (const auto& t : m.transfers) {
    if (t.microbatch != 0) continue;
    EXPECT_EQ(t.edge, "new:edge");
    EXPECT_EQ(t.checksum, 7u);
    ++renamed;
  }
  EXPECT_EQ(renamed, 2);
  for (const auto& g : m.gradients) {
    if (g.iteration == 0) {
      EXPECT_DOUBLE_EQ(g.norm, 2 * g.stats.l2);
    }
  }
  EXPECT_EQ(m.actions.at(1).size(), 3u);
  ASSERT_EQ(m.plan.at(0).size(), 7u);
  EXPECT_EQ(m.plan[0].back().module, "brand_new");
  EXPECT_EQ(m.plan[0].back().peers, (std::vector<int32_t>{1, 0}));
}

TEST(PackedFormat, AnIdMissingFromTextsIsACorruptFile) {
  TempDir dir;
  const std::string run = writeSample(dir);
  {
    Db db(run, Db::Mode::ReadWrite);
    db.exec(
        "UPDATE transfers_rows SET edge_id = 4242 WHERE id = (SELECT min(id) FROM transfers_rows)");
  }
  try {
    loadRun(run);
    ADD_FAILURE() << "a dangling text id was read";
  } catch (const RunFileError& e) {
    EXPECT_EQ(e.kind(), RunFileError::Kind::Corrupt);
    EXPECT_NE(std::string(e.what()).find("text id 4242"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(run), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stagescope::storage::test
