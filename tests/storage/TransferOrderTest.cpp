// The read model's transfer order (core/model/RunModel.h): sorted by (iteration, microbatch,
// edge, direction, srcRank, dstRank, side), records with equal keys in file order.  The reader
// sorts by keys packed into integers (the edge as the rank of its name); this checks the result
// against the documented order computed directly on the records, over edge names whose byte
// order differs from their order of appearance, and over the widest values the reader accepts.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"

namespace stagescope::storage::test {
namespace {

auto documentedKey(const events::TransferRecord& t) {
  return std::make_tuple(t.iteration, t.microbatch, t.edge.str(), static_cast<int>(t.direction),
                         t.srcRank, t.dstRank, static_cast<int>(t.side));
}

TEST(TransferOrder, SortedByTheDocumentedKeyWithFileOrderForTies) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  const auto level = events::RecordLevel::Stats;
  const events::RunInfo info = sampleRun(1, level);
  createRunFile(run, info);

  const std::vector<std::string> edges = {
      "llm:pp9->pp10", "llm:pp10->pp11", "vision->llm", "Vision->llm", "llm", "a", "B"};
  std::mt19937 rng(11);
  std::vector<events::TransferRecord> written;
  for (int i = 0; i < 2000; ++i) {
    const auto side = rng() % 2 ? events::Side::Send : events::Side::Recv;
    auto t = sampleTransfer(side, static_cast<int>(rng() % 3), static_cast<int>(rng() % 3),
                            static_cast<int>(rng() % 3), static_cast<int>(rng() % 3) - 1,
                            edges[rng() % edges.size()]);
    t.rank = 0;  // one shard holds them all, in this (file) order
    t.direction = rng() % 2 ? events::Direction::Gradient : events::Direction::Activation;
    if (i % 97 == 5) {  // the widest values of every packed field
      t.iteration = 999999;
      t.microbatch = 65535;
      t.srcRank = t.dstRank = 4095;
    }
    t.checksum = static_cast<uint64_t>(i) + 1;  // names the record
    written.push_back(t);
  }
  {
    auto w = ShardWriter::open(shardPathFor(run, 0), level, 0);
    w->run(info);
    w->rank(sampleRank(0));
    for (const auto& t : written) w->transfer(t);
    w->close();
  }
  ASSERT_TRUE(mergeShards(run, findShards(run)).ok());
  const model::RunModel m = loadRun(run, LoadOptions{});

  std::vector<events::TransferRecord> want = written;
  std::stable_sort(want.begin(), want.end(), [](const auto& a, const auto& b) {
    return documentedKey(a) < documentedKey(b);
  });
  ASSERT_EQ(m.transfers.size(), want.size());
  ASSERT_EQ(m.transferIds.size(), want.size());
  std::map<int64_t, uint64_t> checksumOfId;  // the row id stays with its record
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(documentedKey(m.transfers[i]), documentedKey(want[i]));
    EXPECT_EQ(m.transfers[i].checksum, want[i].checksum);  // ties in file order
    checksumOfId[m.transferIds[i]] = m.transfers[i].checksum;
  }
  // Row ids are assigned in file order: the i-th smallest id is the i-th record written.
  ASSERT_EQ(checksumOfId.size(), written.size());
  uint64_t k = 1;
  for (const auto& [id, checksum] : checksumOfId) EXPECT_EQ(checksum, k++) << "row id " << id;
}

}  // namespace
}  // namespace stagescope::storage::test
