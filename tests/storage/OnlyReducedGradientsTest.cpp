// LoadOptions::onlyReducedGradients (what `compare` loads): the model holds exactly the whole
// model's reduced gradients, in the same order with the same fields and payloads, and counts
// every other gradient row in RunModel::gradientsNotLoaded, so the event count is unchanged.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <random>
#include <tuple>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"

namespace stagescope::storage::test {
namespace {

// A merged run of one rank with `n` gradients of every phase in random order (file order is
// not the read model's order), each with a distinct checksum.
std::string writeGradients(const TempDir& dir, int n) {
  const std::string run = dir.file("run.db");
  const auto level = events::RecordLevel::Full;
  const events::RunInfo info = sampleRun(1, level);
  createRunFile(run, info);
  const events::GradPhase phases[] = {events::GradPhase::Accumulated, events::GradPhase::Reduced,
                                      events::GradPhase::ParamAfterStep,
                                      events::GradPhase::ParamInitial};
  const std::vector<std::string> params = {"llm.layers.10.w", "llm.layers.9.w", "B", "a"};
  std::mt19937 rng(11);
  auto w = ShardWriter::open(shardPathFor(run, 0), level, 0);
  w->run(info);
  w->rank(sampleRank(0));
  for (int i = 0; i < n; ++i) {
    events::GradientRecord g = sampleGradient(0, static_cast<int>(rng() % 4));
    g.phase = phases[rng() % 4];
    g.param = params[rng() % params.size()];
    g.microbatch = g.phase == events::GradPhase::Accumulated ? static_cast<int32_t>(rng() % 3) : -1;
    g.dp = static_cast<int32_t>(rng() % 2);
    g.checksum = static_cast<uint64_t>(i) + 1;
    g.payload = std::vector<uint8_t>(8, static_cast<uint8_t>(i));
    w->gradient(g);
  }
  w->close();
  EXPECT_TRUE(mergeShards(run, findShards(run)).ok());
  return run;
}

void expectReducedOfWhole(const std::string& run) {
  LoadOptions whole;
  whole.payloads = true;
  LoadOptions reduced = whole;
  reduced.onlyReducedGradients = true;
  const RunModel w = loadRun(run, whole);
  const RunModel r = loadRun(run, reduced);
  std::vector<const events::GradientRecord*> want;
  for (const auto& g : w.gradients)
    if (g.phase == events::GradPhase::Reduced) want.push_back(&g);
  ASSERT_GT(want.size(), 10u);
  ASSERT_LT(want.size(), w.gradients.size());
  ASSERT_EQ(r.gradients.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    const auto& x = *want[i];
    const auto& y = r.gradients[i];
    EXPECT_EQ(std::tie(x.iteration, x.phase, x.param, x.tp, x.pp, x.dp, x.microbatch, x.checksum),
              std::tie(y.iteration, y.phase, y.param, y.tp, y.pp, y.dp, y.microbatch, y.checksum));
    EXPECT_EQ(x.payload, y.payload);
    EXPECT_EQ(x.norm, y.norm);
  }
  EXPECT_EQ(w.gradientsNotLoaded, 0u);
  EXPECT_EQ(r.gradientsNotLoaded, w.gradients.size() - want.size());
  EXPECT_EQ(r.eventCount(), w.eventCount());
}

TEST(OnlyReducedGradients, KeepsTheWholeModelsReducedGradientsAndCountsTheRest) {
  TempDir dir;
  expectReducedOfWhole(writeGradients(dir, 400));
}

// A file without the gradient index (an older writer, or one dropped) reads the same.
TEST(OnlyReducedGradients, SameWithoutTheGradientIndex) {
  TempDir dir;
  const std::string run = writeGradients(dir, 400);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(run.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP INDEX gradients_by_param", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  expectReducedOfWhole(run);
}

}  // namespace
}  // namespace stagescope::storage::test
