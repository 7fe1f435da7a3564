// LoadOptions::onlyReducedGradients (what `compare` loads): the model holds exactly the whole
// model's reduced gradients, in the same order with the same fields and payloads, and counts
// every other gradient row in RunModel::gradientsNotLoaded, so the event count is unchanged;
// in the packed format and the format-2 layout.  The other rows are not read: a bad value there
// fails a whole load, not this one; a bad value in a reduced row fails both.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <random>
#include <tuple>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

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
    g.shape = {2, 1};  // two float32 values
    g.fullShape = {32, 1};
    g.payload = std::vector<uint8_t>(8, static_cast<uint8_t>(i));
    w->gradient(g);
  }
  w->close();
  EXPECT_TRUE(mergeShards(run, findShards(run)).ok());
  return run;
}

model::RunModel load(const std::string& run, bool onlyReduced) {
  LoadOptions o;
  o.payloads = true;
  o.onlyReducedGradients = onlyReduced;
  return loadRun(run, o);
}

void expectReducedOf(const model::RunModel& w, const model::RunModel& r) {
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
  const std::string run = writeGradients(dir, 400);
  expectReducedOf(load(run, false), load(run, true));
}

TEST(OnlyReducedGradients, SameInTheFormat2Layout) {
  TempDir dir;
  const std::string run = writeGradients(dir, 400);
  rewriteAsFormat2(run);
  const model::RunModel w = load(run, false);
  ASSERT_EQ(w.schemaVersion, 2);
  expectReducedOf(w, load(run, true));
}

TEST(OnlyReducedGradients, RowsNotKeptAreNotRead) {
  TempDir dir;
  const std::string run = writeGradients(dir, 400);
  const model::RunModel before = load(run, false);
  auto corrupt = [&](const char* phase) {
    Db db(run, Db::Mode::ReadWrite);
    db.exec(std::string("UPDATE gradients SET rank = -5 WHERE id = (SELECT min(id) FROM ") +
            "gradients WHERE phase = '" + phase + "')");
  };
  corrupt("accumulated");
  EXPECT_THROW(load(run, false), RunFileError);
  expectReducedOf(before, load(run, true));
  corrupt("reduced");
  try {
    load(run, true);
    ADD_FAILURE() << "a bad reduced row must fail the load";
  } catch (const RunFileError& e) {
    EXPECT_NE(std::string(e.what()).find("table gradients: rank = -5"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace stagescope::storage::test
