// The run overview (storage/Overview.h) written at the merge, against an independent
// computation from the loaded run: each action's duration summed into the bucket of its start,
// on rank 0's clock (clock offsets applied), and each iteration's earliest action start.
#include <gtest/gtest.h>

#include <climits>
#include <random>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/Overview.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

namespace stagescope::storage::test {
namespace {

using events::RecordLevel;

std::string writeRun(const TempDir& dir) {
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(3, RecordLevel::Meta));
  std::mt19937 rng(7);
  std::vector<std::string> shards;
  for (int r = 0; r < 3; ++r) {
    shards.push_back(shardPathFor(run, r));
    auto w = ShardWriter::open(shards.back(), RecordLevel::Meta, r);
    auto info = sampleRank(r);
    info.clockOffsetNs = r == 2 ? 250'000 : 0;  // rank 2's clock runs ahead
    w->rank(info);
    int64_t t = 1'000'000 + info.clockOffsetNs;
    for (int it = 0; it < 4; ++it) {
      for (int seq = 0; seq < 300; ++seq) {
        auto a = sampleAction(r, it, seq);
        a.startNs = t;
        a.endNs = t + 100 + static_cast<int64_t>(rng() % 2000);
        t = a.endNs + static_cast<int64_t>(rng() % (r == 1 && it == 2 ? 20000 : 500));  // a bubble
        w->action(a);
      }
    }
    w->close();
  }
  EXPECT_TRUE(mergeShards(run, shards).ok());
  return run;
}

TEST(Overview, BucketsAndIterationStartsMatchTheLoadedActions) {
  TempDir dir;
  const std::string run = writeRun(dir);
  const auto o = readOverview(run);
  ASSERT_TRUE(o.has_value());
  const model::RunModel m = loadRun(run);  // clock offsets applied
  EXPECT_EQ(o->startNs, m.minTimeNs);
  EXPECT_EQ(o->endNs, m.maxTimeNs);
  ASSERT_EQ(o->buckets, kOverviewBuckets);
  ASSERT_EQ(o->rows.size(), 3u);
  std::vector<int64_t> iterStart;
  int64_t total = 0;
  for (int r = 0; r < 3; ++r) {
    std::vector<int64_t> busy(kOverviewBuckets, 0), items(kOverviewBuckets, 0);
    for (const auto& a : m.actions[r]) {
      const int64_t b = std::min<int64_t>(
          kOverviewBuckets - 1,
          static_cast<int64_t>(static_cast<double>(a.startNs - m.minTimeNs) * kOverviewBuckets /
                               static_cast<double>(m.maxTimeNs - m.minTimeNs + 1)));
      // Busy: computing (forward, backward); waiting in a receive is the bubble.
      if (a.kind == events::ActionKind::Forward || a.kind == events::ActionKind::Backward)
        busy[b] += a.endNs - a.startNs;
      ++items[b];
      ++total;
      if (iterStart.size() <= static_cast<size_t>(a.iteration))
        iterStart.resize(a.iteration + 1, INT64_MAX);
      iterStart[a.iteration] = std::min(iterStart[a.iteration], a.startNs);
    }
    EXPECT_EQ(o->rows[r].rank, r);
    EXPECT_EQ(o->rows[r].busyNs, busy) << "rank " << r;
    EXPECT_EQ(o->rows[r].items, items) << "rank " << r;
  }
  EXPECT_EQ(o->items, total);
  EXPECT_EQ(o->iterationStartNs, iterStart);
}

TEST(Overview, AFileWithoutOneSaysSo) {
  TempDir dir;
  const std::string run = writeRun(dir);
  {
    Db db(run, Db::Mode::ReadWrite);
    db.exec("DROP TABLE overview_span");
  }
  EXPECT_FALSE(readOverview(run).has_value());
}

}  // namespace
}  // namespace stagescope::storage::test
