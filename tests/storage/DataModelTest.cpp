// The data model's contracts (docs/run-file.md): the checksum function against published test
// vectors, non-finite values stored and read back as such, the reference in its own tables,
// wait records as data, record filters on every table, and format-1 files still readable with
// their checksums labelled as the legacy function.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include "StorageTestUtil.h"
#include "core/events/Checksum.h"
#include "core/events/Recorder.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/Schema.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

#ifndef STAGESCOPE_SOURCE_DIR
#error "STAGESCOPE_SOURCE_DIR must name the source tree"
#endif

namespace stagescope::storage::test {
namespace {

using events::RecordLevel;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The sanity buffer of the xxHash test suite: byte i is the top byte of PRIME32 * PRIME64^i.
std::vector<uint8_t> sanityBuffer(size_t n) {
  std::vector<uint8_t> b(n);
  uint64_t gen = 2654435761u;
  for (auto& x : b) {
    x = static_cast<uint8_t>(gen >> 56);
    gen *= 11400714785074694797ull;
  }
  return b;
}

TEST(Checksum, Xxh3PublishedTestVectors) {
  // XXH3_64bits, seed 0: the published vectors of xxHash's sanity check (one per code path:
  // empty, 1-3, 4-8, 9-16, 17-128, 129-240 bytes, one block, several blocks, ragged tail).
  const std::pair<size_t, uint64_t> vectors[] = {
      {0, 0x2D06800538D394C2ull},   {1, 0xC44BDFF4074EECDBull},    {6, 0x27B56A84CD2D7325ull},
      {12, 0xA713DAF0DFBB77E7ull},  {24, 0xA3FE70BF9D3510EBull},   {48, 0x397DA259ECBA1F11ull},
      {80, 0xBCDEFBBB2C47C90Aull},  {195, 0xCD94217EE362EC3Aull},  {403, 0xCDEB804D65C6DEA4ull},
      {512, 0x617E49599013CB6Bull}, {2048, 0xDD59E2C3A5F038E0ull}, {2240, 0x6E73A90539CF2948ull},
      {2367, 0xCB37AEB9E5D361EDull}};
  const auto buf = sanityBuffer(4096 + 64 + 1);
  for (const auto& [len, want] : vectors) {
    SCOPED_TRACE(len);
    EXPECT_EQ(events::checksumBytes(len ? buf.data() : nullptr, len), want);
  }
}

TEST(Checksum, Fnv1a64PublishedTestVectors) {
  // The FNV-1a 64 vectors of the function's authors (offset basis 14695981039346656037).
  EXPECT_EQ(events::fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(events::fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(events::fnv1a64("foobar"), 0x85944171f73967e8ull);
}

// One run file with two ranks, a reference, non-finite values and a wait.
struct SampleFile {
  TempDir dir;
  std::string run = dir.file("run.db");
  SampleFile() {
    createRunFile(run, sampleRun(2, RecordLevel::Full));
    auto w0 = ShardWriter::open(shardPathFor(run, 0), RecordLevel::Full, 0);
    w0->rank(sampleRank(0));
    w0->loss({0, 0, 0, 0, 2.0});
    w0->loss({0, 0, 1, 0, 4.0});
    w0->loss({0, 0, -1, 0, 3.0});
    w0->loss({0, 1, 0, 0, kNaN});
    w0->loss({0, 1, 1, 0, kInf});
    w0->loss({0, 1, -1, 0, -kInf});
    auto g = sampleGradient(0, 1);
    g.norm = kNaN;
    g.stats.l2 = kInf;
    g.stats.mean = kNaN;
    w0->gradient(g);
    events::WaitRecord wait;
    wait.rank = 0;
    wait.iteration = 1;
    wait.actionSeq = 7;
    wait.action = events::ActionKind::SendBackwardRecvForward;
    wait.microbatch = 3;
    wait.peer = 1;
    wait.op = events::WaitOp::Recv;
    wait.edge = "llm:pp0->pp1";
    wait.direction = events::Direction::Gradient;
    wait.timeoutSeconds = 2.5;
    wait.error = "Timed out";
    wait.timeNs = 123456;
    w0->wait(wait);
    w0->close();
    auto ref = ShardWriter::open(run + ".reference.shard", RecordLevel::Full, -1);
    ref->referenceLoss({-1, 0, 0, 0, 100.0});
    ref->referenceLoss({-1, 0, -1, 0, 100.0});
    auto rg = sampleGradient(-1, 0);
    rg.phase = events::GradPhase::Reference;
    ref->referenceGradient(rg);
    ref->close();
    auto w1 = ShardWriter::open(shardPathFor(run, 1), RecordLevel::Full, 1);
    w1->rank(sampleRank(1));
    w1->close();
    const auto merged =
        mergeShards(run, {shardPathFor(run, 0), shardPathFor(run, 1), run + ".reference.shard"});
    EXPECT_TRUE(merged.ok());
  }
};

TEST(NonFinite, StoredAndReadBackAsSuch) {
  SampleFile f;
  LoadOptions opts;
  const model::RunModel m = loadRun(f.run, opts);
  ASSERT_EQ(m.losses.size(), 6u);
  // Sorted by (iteration, microbatch): iteration 1 has mb -1 (-Inf), 0 (NaN), 1 (+Inf).
  EXPECT_TRUE(std::isinf(m.losses[3].loss) && m.losses[3].loss < 0);
  EXPECT_TRUE(std::isnan(m.losses[4].loss));
  EXPECT_TRUE(std::isinf(m.losses[5].loss) && m.losses[5].loss > 0);
  ASSERT_EQ(m.gradients.size(), 1u);
  EXPECT_TRUE(std::isnan(m.gradients[0].norm));
  EXPECT_TRUE(std::isnan(m.gradients[0].stats.mean));
  EXPECT_TRUE(std::isinf(m.gradients[0].stats.l2));

  // In the file: NaN is the text 'NaN' (never NULL), ±Inf are REAL.
  Db db(f.run, Db::Mode::ReadOnly);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM losses WHERE loss IS NULL"), 0);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM losses WHERE typeof(loss) = 'text' AND loss = "
                        "'NaN' AND iteration = 1 AND microbatch = 0"),
            1);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM losses WHERE typeof(loss) = 'real' AND loss > "
                        "1e308 AND microbatch = 1 AND iteration = 1"),
            1);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM gradients WHERE norm = 'NaN'"), 1);
}

TEST(NonFinite, TextOtherThanNaNIsCorrupt) {
  SampleFile f;
  {
    Db db(f.run, Db::Mode::ReadWrite);
    db.exec("UPDATE losses SET loss = 'oops' WHERE iteration = 0 AND microbatch = 0");
  }
  try {
    loadRun(f.run);
    FAIL() << "a REAL column holding 'oops' must not load";
  } catch (const RunFileError& e) {
    EXPECT_EQ(e.kind(), RunFileError::Kind::Corrupt);
    EXPECT_NE(std::string(e.what()).find("losses"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'oops'"), std::string::npos) << e.what();
  }
}

TEST(Reference, OwnTablesNeverMixedIntoPerRankRows) {
  SampleFile f;
  LoadOptions opts;
  opts.payloads = true;
  const model::RunModel m = loadRun(f.run, opts);
  for (const auto& l : m.losses) EXPECT_GE(l.rank, 0);
  for (const auto& g : m.gradients) EXPECT_NE(g.phase, events::GradPhase::Reference);
  ASSERT_EQ(m.referenceLosses.size(), 2u);
  EXPECT_EQ(m.referenceLosses[0].microbatch, -1);
  EXPECT_EQ(m.referenceLosses[1].loss, 100.0);
  ASSERT_EQ(m.referenceGradients.size(), 1u);
  EXPECT_EQ(m.referenceGradients[0].phase, events::GradPhase::Reference);
  EXPECT_EQ(m.referenceGradients[0].payload, sampleGradient(-1, 0).payload);
  Db db(f.run, Db::Mode::ReadOnly);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM losses WHERE rank < 0"), 0);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM gradients WHERE rank < 0"), 0);
}

TEST(Waits, StructuredRowsRoundTrip) {
  SampleFile f;
  const model::RunModel m = loadRun(f.run);
  ASSERT_EQ(m.waits.size(), 1u);
  const auto& w = m.waits[0];
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.iteration, 1);
  EXPECT_EQ(w.actionSeq, 7);
  EXPECT_EQ(w.action, events::ActionKind::SendBackwardRecvForward);
  EXPECT_EQ(w.microbatch, 3);
  EXPECT_EQ(w.peer, 1);
  EXPECT_EQ(w.op, events::WaitOp::Recv);
  EXPECT_EQ(w.edge, "llm:pp0->pp1");
  EXPECT_EQ(w.direction, events::Direction::Gradient);
  EXPECT_EQ(w.timeoutSeconds, 2.5);
  EXPECT_EQ(w.error, "Timed out");
  EXPECT_EQ(w.timeNs, 123456);
}

// Every ```sql block of docs/run-file.md, statement by statement.
std::vector<std::string> documentedQueries() {
  std::ifstream in(std::string(STAGESCOPE_SOURCE_DIR) + "/docs/run-file.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  std::vector<std::string> out;
  const std::regex block("```sql\n([\\s\\S]*?)```");
  for (std::sregex_iterator it(doc.begin(), doc.end(), block), end; it != end; ++it) {
    std::string sql = (*it)[1];
    size_t start = 0;
    for (size_t semi; (semi = sql.find(';', start)) != std::string::npos; start = semi + 1)
      out.push_back(sql.substr(start, semi + 1 - start));
  }
  return out;
}

TEST(DocumentedQueries, RunOnARealRunFile) {
  SampleFile f;
  const auto queries = documentedQueries();
  ASSERT_GE(queries.size(), 6u) << "docs/run-file.md lost its example queries";
  Db db(f.run, Db::Mode::ReadOnly);
  for (const auto& q : queries) {
    SCOPED_TRACE(q);
    Stmt s = db.prepare(q);
    while (s.step()) {
    }
  }
}

TEST(DocumentedQueries, LossPerIterationLeavesTheReferenceOutAndShowsNaN) {
  SampleFile f;
  std::string lossQuery;
  for (const auto& q : documentedQueries())
    if (q.find("FROM losses") != std::string::npos) lossQuery = q;
  ASSERT_FALSE(lossQuery.empty());
  Db db(f.run, Db::Mode::ReadOnly);
  Stmt s = db.prepare(lossQuery);
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.i32(0), 0);
  EXPECT_EQ(s.f64(1), 3.0);  // (2 + 4) / 2: the reference's 100 is not averaged in
  ASSERT_TRUE(s.step());
  EXPECT_EQ(s.i32(0), 1);
  EXPECT_EQ(s.text(1), "NaN");  // a NaN microbatch loss makes the iteration NaN, never 0
  EXPECT_FALSE(s.step());
}

TEST(RecordFilter, FilteringRecorderAppliesToEveryTable) {
  TempDir dir;
  const std::string shard = dir.file("r.rank3.shard");
  {
    auto writer = ShardWriter::open(shard, RecordLevel::Stats, 3);
    events::FilteringRecorder kept(*writer, {{1}, {}, {}}, 3, "llm");
    for (int it = 0; it < 3; ++it) {
      kept.planned(sampleAction(3, it, 0));
      kept.action(sampleAction(3, it, 0));
      kept.transfer(sampleTransfer(events::Side::Send, 3, 4, it, 0));
      kept.gradient(sampleGradient(3, it));
      kept.loss(sampleLoss(3, it, 0));
      kept.input(sampleInput(3, it, 0));
    }
    kept.diagnosis(sampleDiagnosis(3));  // always kept
    events::FilteringRecorder dropped(*writer, {{}, {"vision"}, {}}, 3, "llm");
    dropped.transfer(sampleTransfer(events::Side::Send, 3, 4, 1, 1));
    dropped.diagnosis(sampleDiagnosis(3));  // kept even for a filtered-out module
    writer->close();
  }
  Db db(shard, Db::Mode::ReadOnly);
  for (const char* table : {"plan", "actions", "transfers", "gradients", "losses", "inputs"}) {
    SCOPED_TRACE(table);
    EXPECT_EQ(db.queryInt(std::string("SELECT count(*) FROM ") + table), 1);
    EXPECT_EQ(db.queryInt(std::string("SELECT min(iteration) FROM ") + table), 1);
  }
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM diagnoses"), 2);
}

TEST(RecordFilter, TheRunFileSaysWhatWasFiltered) {
  SampleFile f;
  const model::RunModel m = loadRun(f.run);
  EXPECT_EQ(m.info.recordFilter.iterations, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(m.info.recordFilter.modules, (std::vector<std::string>{"llm", "vision"}));
  EXPECT_EQ(m.info.recordFilter.ranks, (std::vector<int32_t>{0, 1, 5}));
  EXPECT_FALSE(m.info.recordFilter.all());
}

// A format-1 file: the fuzz corpus's run recorded by the format-1 build, plus the rows that
// build wrote for a reference (rank -1) and for a NaN loss (NULL).
TEST(FormatVersion1, StillReadableWithLegacyChecksumsLabelled) {
  TempDir dir;
  const std::string v1 = dir.file("v1.db");
  std::filesystem::copy_file(std::string(STAGESCOPE_SOURCE_DIR) + "/tests/fuzz/corpus/run-stats.db",
                             v1);
  {
    Db db(v1, Db::Mode::ReadWrite);
    ASSERT_EQ(db.queryInt("PRAGMA user_version"), 1);
    db.exec(
        "INSERT INTO losses(rank, iteration, microbatch, dp, loss) VALUES (-1, 0, -1, 0, 9.5), "
        "(0, 0, 5, 0, NULL)");
  }
  const model::RunModel m = loadRun(v1);
  EXPECT_EQ(m.schemaVersion, 1);
  EXPECT_EQ(m.info.checksumFunction, events::ChecksumFunction::LegacyFnv1a64);
  EXPECT_FALSE(m.transfers.empty());
  ASSERT_EQ(m.referenceLosses.size(), 1u);
  EXPECT_EQ(m.referenceLosses[0].loss, 9.5);
  bool sawNaN = false;
  for (const auto& l : m.losses) {
    EXPECT_GE(l.rank, 0);
    if (l.microbatch == 5) sawNaN = std::isnan(l.loss);
  }
  EXPECT_TRUE(sawNaN) << "format 1 stored a NaN loss as NULL; it reads back as NaN";

  SampleFile f;
  const model::RunModel v2 = loadRun(f.run);
  EXPECT_EQ(v2.info.checksumFunction, events::ChecksumFunction::Xxh3_64);
  EXPECT_FALSE(model::sameChecksumFunction(m, v2));
  EXPECT_TRUE(model::sameChecksumFunction(v2, v2));
}

TEST(FormatVersion1, ShardOfAnotherFormatIsNotMerged) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(1, RecordLevel::Stats));
  const std::string shard = shardPathFor(run, 0);
  {
    auto w = ShardWriter::open(shard, RecordLevel::Stats, 0);
    w->close();
    Db db(shard, Db::Mode::ReadWrite);
    db.exec("PRAGMA user_version = 1");
  }
  const auto merged = mergeShards(run, {shard});
  EXPECT_EQ(merged.merged, 0);
  ASSERT_EQ(merged.notes.size(), 1u);
  EXPECT_NE(merged.notes[0].find("format version 1"), std::string::npos) << merged.notes[0];
}

}  // namespace
}  // namespace stagescope::storage::test
