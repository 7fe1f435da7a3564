// The read model's gradient order (core/model/RunModel.h): sorted by (iteration, phase, param,
// tp, pp, dp, microbatch), records with equal keys in file order.  The reader sorts by packed
// integer keys (the param as the rank of its name); this checks the result against the
// documented order computed directly on the records, over names whose byte order differs from
// their order of appearance and from "natural" order (llm.10 < llm.9, 'B' < 'a', prefixes).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"

namespace stagescope::storage::test {
namespace {

// `wide`: some records carry the largest values the reader accepts (iteration 999999, tp/pp/dp
// 4095, microbatch 65535), so the fields need more than 64 bits and the reader sorts by
// comparing them one by one instead of by a packed key.
void expectDocumentedOrder(bool wide) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  const auto level = events::RecordLevel::Stats;
  const events::RunInfo info = sampleRun(1, level);
  createRunFile(run, info);

  const std::vector<std::string> params = {"llm.layers.9.w", "llm.layers.10.w", "llm.w", "llm",
                                           "Vision.w",       "llm.layers.1.w",  "a",     "B"};
  const events::GradPhase phases[] = {events::GradPhase::ParamAfterStep,
                                      events::GradPhase::Accumulated, events::GradPhase::Reduced};
  std::mt19937 rng(5);
  std::vector<events::GradientRecord> written;
  for (int i = 0; i < 600; ++i) {
    events::GradientRecord g = sampleGradient(0, static_cast<int>(rng() % 3));
    g.phase = phases[rng() % 3];
    g.param = params[rng() % params.size()];
    g.tp = static_cast<int32_t>(rng() % 2);
    g.pp = static_cast<int32_t>(rng() % 2);
    g.dp = static_cast<int32_t>(rng() % 2);
    g.microbatch = static_cast<int32_t>(rng() % 3) - 1;  // -1..1
    g.partitionDim = -1;
    g.checksum = static_cast<uint64_t>(i) + 1;  // the write (file) order
    if (wide && i % 100 == 7) {
      g.iteration = 999999;
      g.tp = g.pp = g.dp = 4095;
      g.microbatch = 65535;
    }
    written.push_back(g);
  }
  {
    auto w = ShardWriter::open(shardPathFor(run, 0), level, 0);
    w->run(info);
    w->rank(sampleRank(0));
    for (const auto& g : written) w->gradient(g);
    w->close();
  }
  ASSERT_TRUE(mergeShards(run, findShards(run)).ok());
  const model::RunModel m = loadRun(run, LoadOptions{});

  // The documented order, computed on the records themselves (std::string comparison).
  auto key = [](const events::GradientRecord& g) {
    return std::make_tuple(g.iteration, static_cast<int>(g.phase), g.param.str(), g.tp, g.pp, g.dp,
                           g.microbatch);
  };
  std::vector<events::GradientRecord> want = written;
  std::stable_sort(want.begin(), want.end(),
                   [&](const auto& a, const auto& b) { return key(a) < key(b); });
  ASSERT_EQ(m.gradients.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(key(m.gradients[i]), key(want[i]));
    EXPECT_EQ(m.gradients[i].checksum, want[i].checksum);  // ties in file order
  }
}

TEST(GradientOrder, SortedByTheDocumentedKeyWithFileOrderForTies) {
  expectDocumentedOrder(false);
}

TEST(GradientOrder, FieldsWiderThan64BitsSortTheSame) {
  expectDocumentedOrder(true);
}

}  // namespace
}  // namespace stagescope::storage::test
