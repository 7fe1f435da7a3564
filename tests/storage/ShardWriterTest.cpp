// ShardWriter's rows as stored in the shard, read back with plain SQL: the writer binds many
// rows to one INSERT and formats each integer list (peers, shapes) only when it differs from
// the previous one in that row's slot, so these tests write more rows than one statement
// holds, with lists that repeat and change, and compare every row, in order, against the
// expected text built here independently.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "StorageTestUtil.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

namespace stagescope::storage::test {
namespace {

using events::RecordLevel;

// "a,b,c": the shard's text of an integer list, built without the writer's code.
template <typename T>
std::string joined(const std::vector<T>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// Lists that repeat for a few rows, then change (sometimes to the empty list).
std::vector<int32_t> peersOf(int i) {
  if (i % 7 == 6) return {};
  return {i / 3, i / 3 + 100};
}
std::vector<int64_t> shapeOf(int i) {
  return {2, i / 4 + 1, 8};
}

// Not a multiple of the rows per statement, and more than two statements' worth.
constexpr int kRows = 16 * 3 + 5;

TEST(ShardWriter, ManyRowsKeepEveryValueAndTheirOrder) {
  TempDir dir;
  const std::string shard = dir.file("x.rank0.shard");
  {
    auto w = ShardWriter::open(shard, RecordLevel::Stats, 0);
    for (int i = 0; i < kRows; ++i) {
      events::ActionRecord a;
      a.rank = 0;
      a.iteration = i / 10;
      a.seq = i;
      a.kind = static_cast<events::ActionKind>(i % 4);
      a.microbatch = i % 5;
      a.module = "m" + std::to_string(i % 3);
      a.stage = i % 2;
      a.peers = peersOf(i);
      a.startNs = 1000 * i;
      a.endNs = 1000 * i + 7;
      w->planned(a);
      w->action(a);

      events::TransferRecord t = sampleTransfer(events::Side::Send, 0, 1, i / 10, i);
      t.shape = shapeOf(i);
      t.checksum = 0x1000u + static_cast<uint64_t>(i);
      t.startNs = 10 * i;
      w->transfer(std::move(t));

      events::GradientRecord g = sampleGradient(0, i);
      g.param = "p" + std::to_string(i);
      g.shape = shapeOf(i);
      g.fullShape = shapeOf(i + 5);
      w->gradient(std::move(g));

      events::CollectiveRecord c;
      c.rank = 0;
      c.iteration = i;
      c.seq = i;
      c.op = "all_reduce";
      c.group = "dp";
      c.groupRanks = peersOf(i);
      c.shape = shapeOf(i + 2);
      c.dtype = "float32";
      c.state = "completed";
      c.outChecksum = 77u + static_cast<uint64_t>(i);
      w->collective(std::move(c));
    }
    w->close();
    ASSERT_EQ(w->error(), "");
  }

  Db db(shard, Db::Mode::ReadOnly);
  for (const char* table : {"plan", "actions"}) {
    Stmt s = db.prepare(std::string("SELECT seq, iteration, kind, microbatch, module, stage, peers "
                                    "FROM ") +
                        table + " ORDER BY rowid");
    int i = 0;
    for (; s.step(); ++i) {
      SCOPED_TRACE(std::string(table) + " row " + std::to_string(i));
      ASSERT_LT(i, kRows);
      EXPECT_EQ(s.i32(0), i);
      EXPECT_EQ(s.i32(1), i / 10);
      EXPECT_EQ(s.text(2), events::toString(static_cast<events::ActionKind>(i % 4)));
      EXPECT_EQ(s.i32(3), i % 5);
      EXPECT_EQ(s.text(4), "m" + std::to_string(i % 3));
      EXPECT_EQ(s.i32(5), i % 2);
      EXPECT_EQ(s.text(6), joined(peersOf(i)));
    }
    EXPECT_EQ(i, kRows) << table;
  }
  {
    Stmt s =
        db.prepare("SELECT microbatch, shape, checksum, start_ns FROM transfers ORDER BY rowid");
    int i = 0;
    for (; s.step(); ++i) {
      SCOPED_TRACE("transfer row " + std::to_string(i));
      EXPECT_EQ(s.i32(0), i);
      EXPECT_EQ(s.text(1), joined(shapeOf(i)));
      EXPECT_EQ(s.i64(2), 0x1000 + i);
      EXPECT_EQ(s.i64(3), 10 * i);
    }
    EXPECT_EQ(i, kRows);
  }
  {
    Stmt s = db.prepare("SELECT iteration, param, shape, full_shape FROM gradients ORDER BY rowid");
    int i = 0;
    for (; s.step(); ++i) {
      SCOPED_TRACE("gradient row " + std::to_string(i));
      EXPECT_EQ(s.i32(0), i);
      EXPECT_EQ(s.text(1), "p" + std::to_string(i));
      EXPECT_EQ(s.text(2), joined(shapeOf(i)));
      EXPECT_EQ(s.text(3), joined(shapeOf(i + 5)));
    }
    EXPECT_EQ(i, kRows);
  }
  {
    Stmt s = db.prepare(
        "SELECT iteration, group_ranks, shape, out_checksum FROM collectives ORDER BY rowid");
    int i = 0;
    for (; s.step(); ++i) {
      SCOPED_TRACE("collective row " + std::to_string(i));
      EXPECT_EQ(s.i32(0), i);
      EXPECT_EQ(s.text(1), joined(peersOf(i)));
      EXPECT_EQ(s.text(2), joined(shapeOf(i + 2)));
      EXPECT_EQ(s.i64(3), 77 + i);
    }
    EXPECT_EQ(i, kRows);
  }
}

}  // namespace
}  // namespace stagescope::storage::test
