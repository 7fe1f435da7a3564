// A diagnosis's signal (events::DiagnosisRecord::signal, the `diagnoses.signal` column added
// within format 3): written and read as a field, whatever the sentence says; a file or shard
// written before the column existed still reads, the signal then taken from the sentence of
// the records that name it; merges across the two layouts keep working.
#include <gtest/gtest.h>

#include <vector>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

namespace stagescope::storage::test {
namespace {

using events::DiagnosisKind;

events::DiagnosisRecord diagnosis(int rank, DiagnosisKind kind, const std::string& message,
                                  int signal, int waitsOn = -1) {
  events::DiagnosisRecord d;
  d.rank = rank;
  d.kind = kind;
  d.waitsOnRank = waitsOn;
  d.message = message;
  d.signal = signal;
  d.timeNs = 1000 + rank;
  return d;
}

// Rank 0's records: each sentence says one thing, each field another, so a reader that reads
// the sentence instead of the field is caught.
std::vector<events::DiagnosisRecord> records() {
  return {
      // the field knows the signal; the sentence does not phrase it "killed by signal"
      diagnosis(0, DiagnosisKind::PeerDead, "rank 1 ended on SIGKILL", 9, 1),
      // the sentence names a signal; the field (written by this build) says none is known
      diagnosis(0, DiagnosisKind::RankKilled, "killed by signal 15 (Terminated)", 0),
      // another rank's end quoted in a timeout: never this record's signal
      diagnosis(0, DiagnosisKind::Timeout, "root cause: rank 1 ... killed by signal 9 (SIGKILL)", 0,
                1),
      // an older build's peer_dead and rank_killed sentences
      diagnosis(0, DiagnosisKind::PeerDead,
                "rank 1 (host h, pid 7) stopped heartbeating at T, process gone: killed by signal "
                "6 (SIGABRT), without a record of why",
                6, 1),
  };
}

std::vector<int> signalsOf(const std::string& run) {
  std::vector<int> out;
  for (const auto& d : loadRun(run).diagnoses) out.push_back(d.signal);
  return out;
}

// A run of one rank whose shard holds records(); `shardEdit` runs on the shard before the merge
// (an older build's layout), `runEdit` on the run file before it.
std::string writeRun(const TempDir& dir, const std::string& shardEdit = "",
                     const std::string& runEdit = "") {
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(1, events::RecordLevel::Meta));
  {
    auto w = ShardWriter::open(shardPathFor(run, 0), events::RecordLevel::Meta, 0);
    for (auto d : records()) w->diagnosis(std::move(d));
  }
  if (!shardEdit.empty()) execSql(shardPathFor(run, 0), shardEdit);
  if (!runEdit.empty()) execSql(run, runEdit);
  EXPECT_TRUE(mergeShards(run, findShards(run)).ok());
  return run;
}

const char* const kDropSignal = "ALTER TABLE diagnoses DROP COLUMN signal";

TEST(DiagnosisSignal, ComesBackAsWrittenWhateverTheSentenceSays) {
  TempDir dir;
  EXPECT_EQ(signalsOf(writeRun(dir)), (std::vector<int>{9, 0, 0, 6}));
}

// A run file written before the column existed: the signal of a peer_dead or rank_killed record
// comes from its "killed by signal N"; any other kind's sentence, or one that does not say it,
// gives 0.
TEST(DiagnosisSignal, AnOlderRunFileGivesItFromTheSentence) {
  TempDir dir;
  const std::string run = writeRun(dir);
  execSql(run, kDropSignal);
  EXPECT_EQ(signalsOf(run), (std::vector<int>{0, 15, 0, 6}));
}

// An older build's shard (no column) merged into this build's run file: its rows hold NULL
// (not recorded), read from the sentence as an older file's.
TEST(DiagnosisSignal, AnOlderShardMergesIntoANewRunFile) {
  TempDir dir;
  EXPECT_EQ(signalsOf(writeRun(dir, kDropSignal)), (std::vector<int>{0, 15, 0, 6}));
}

// This build's shard merged into an older build's run file (no column): the merge leaves the
// column out, and the run file reads as the older file it is.
TEST(DiagnosisSignal, ANewShardMergesIntoAnOlderRunFile) {
  TempDir dir;
  const std::string run = writeRun(dir, "", kDropSignal);
  EXPECT_EQ(signalsOf(run), (std::vector<int>{0, 15, 0, 6}));
  Db db(run, Db::Mode::ReadOnly);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM pragma_table_info('diagnoses') WHERE name = "
                        "'signal'"),
            0);  // the older file's layout is kept
}

// A re-merge of the same shard replaces its rows, the signal included.
TEST(DiagnosisSignal, ARemergeKeepsTheSignal) {
  TempDir dir;
  const std::string run = writeRun(dir);
  ASSERT_TRUE(mergeShards(run, findShards(run)).ok());
  EXPECT_EQ(signalsOf(run), (std::vector<int>{9, 0, 0, 6}));
}

}  // namespace
}  // namespace stagescope::storage::test
