// Mutated run files: every count, size, index or offset the reader takes from a file is checked
// before it is used.  A real merged run file (every table filled) is changed one value at a time
// through SQL (huge, negative, out-of-shape values), truncated at many offsets and bit-flipped;
// loadRun must either load it or throw RunFileError: never another exception (bad_alloc from a
// size it trusted), never a crash, never a runaway loop.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

namespace stagescope::storage::test {
namespace {

// A merged run of 2 ranks with a row in every table (payloads too, level full).
std::string makeFullRun(const TempDir& dir) {
  const std::string run = dir.file("good.db");
  createRunFile(run, sampleRun(2, events::RecordLevel::Full));
  for (int r = 0; r < 2; ++r) {
    auto w = ShardWriter::open(shardPathFor(run, r), events::RecordLevel::Full, r);
    w->rank(sampleRank(r));
    for (int seq = 0; seq < 40; ++seq) {
      w->planned(sampleAction(r, 0, seq));
      w->action(sampleAction(r, 0, seq));
    }
    w->transfer(sampleTransfer(r == 0 ? events::Side::Send : events::Side::Recv, 0, 1, 0, 1));
    w->gradient(sampleGradient(r, 0));
    w->loss(sampleLoss(r, 0, 1));
    w->input(sampleInput(r, 0, 1));
    w->diagnosis(sampleDiagnosis(r));
    w->close();
  }
  mergeShards(run, findShards(run));
  for (int r = 0; r < 2; ++r) std::filesystem::remove(shardPathFor(run, r));
  return run;
}

// "" when `path` loads or fails with RunFileError; otherwise what went wrong.
std::string loadOutcome(const std::string& path) {
  try {
    LoadOptions opts;
    opts.payloads = true;
    model::RunModel m = loadRun(path, opts);
    for (size_t i = 0; i < m.transferIds.size(); ++i) loadTransferPayload(path, m.transferIds[i]);
  } catch (const RunFileError&) {
    return "";
  } catch (const std::exception& e) {
    return std::string("an exception other than RunFileError: ") + e.what();
  }
  return "";
}

// Each statement changes one value the reader would use to size, index or offset something.
const char* const kMutations[] = {
    "UPDATE run SET world_size = 2147483647",
    "UPDATE run SET world_size = 400000000",
    "UPDATE run SET world_size = -5",
    "UPDATE run SET world_size = 9223372036854775807",
    "UPDATE run SET iterations = 2147483647",
    "UPDATE run SET iterations = -1",
    "UPDATE run SET microbatches = 2147483647",
    "UPDATE modules SET tp = 0",
    "UPDATE modules SET pp = 2147483647, dp = 2147483647, rank_offset = 2147483647",
    "UPDATE ranks SET rank = 1000000",
    "UPDATE ranks SET global_stage = 2147483647, warmup = -3",
    "UPDATE actions SET rank = 1048575",
    "UPDATE actions SET rank = -1",
    "UPDATE actions SET iteration = 2147483647",
    "UPDATE actions SET iteration = 4294967296",
    "UPDATE actions SET microbatch = 2147483647",
    "UPDATE plan SET rank = 999999",
    "UPDATE actions SET peers = '2147483647,-4'",
    "UPDATE transfers SET rank = 2147483647",
    "UPDATE transfers SET src_rank = -7",
    "UPDATE transfers SET iteration = -2",
    "UPDATE transfers SET shape = '2147483647,2147483647,2147483647'",
    "UPDATE transfers SET shape = '-1,2'",
    "UPDATE gradients SET iteration = 2147483647",
    "UPDATE gradients SET full_shape = '2147483647,2147483647'",
    "UPDATE gradients SET partition_dim = 7",
    "UPDATE gradients SET partition_dim = 0, partition_offset = 9223372036854775807",
    "UPDATE gradients SET partition_dim = 0, partition_offset = -4",
    "UPDATE losses SET iteration = 2147483647",
    "UPDATE losses SET iteration = -5",
    "UPDATE inputs SET shape = '99999999999,99999999999'",
    "UPDATE diagnoses SET rank = 2147483647",
    "UPDATE diagnoses SET signal = 2147483647",
    "UPDATE diagnoses SET signal = 'nine'",
    "UPDATE shards SET rank = 2147483647",
    "UPDATE ranks SET clock_offset_ns = -9223372036854775808",
    "UPDATE actions SET start_ns = -9223372036854775808, end_ns = 9223372036854775807",
    // the resolved settings analysis reads instead of the config text
    "UPDATE run_settings SET seed = -1",
    "UPDATE run_settings SET micro_batch_size = 0",
    "UPDATE run_settings SET dtype = 'float99'",
    "UPDATE run_settings SET optimizer_kind = 'rmsprop'",
    "UPDATE run_settings SET optimizer_lr = 'fast'",
    "UPDATE run_settings SET forward_only = 2",
    "UPDATE module_settings SET dp = 0",
    "UPDATE module_settings SET kind = 'decoder'",
    // what produced the file, and a captured job's declared schedule
    "UPDATE run_origin SET origin = 'alien'",
    "INSERT INTO job_schedule VALUES(-3, 'llm', 0, 0, 2, 1)",
    "INSERT INTO job_schedule VALUES(0, 'llm', 0, 0, 2, 2147483648)",
    "INSERT INTO job_schedule VALUES(0, 'llm', 'first', 0, 2, 1)",
};

TEST(Mutation, OutOfRangeValuesAreRejectedNotTrusted) {
  TempDir dir;
  const std::string good = makeFullRun(dir);
  ASSERT_EQ(loadOutcome(good), "");
  ASSERT_NO_THROW(loadRun(good));
  int rejected = 0;
  for (const char* sql : kMutations) {
    SCOPED_TRACE(sql);
    const std::string path = dir.file("mutated.db");
    std::filesystem::copy_file(good, path, std::filesystem::copy_options::overwrite_existing);
    {
      Db db(path, Db::Mode::ReadWrite);
      db.exec(sql);
    }
    EXPECT_EQ(loadOutcome(path), "");
    try {
      loadRun(path);
    } catch (const RunFileError& e) {
      ++rejected;
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  // Most mutations are out of range and must be reported (the time values and the clock
  // offset are legal, merely absurd: they load).
  EXPECT_GE(rejected, static_cast<int>(std::size(kMutations)) - 2);
}

TEST(Mutation, TruncationsAndBitFlipsNeverEscapeAsOtherErrors) {
  TempDir dir;
  const std::string bytes = readBytes(makeFullRun(dir));
  const std::string path = dir.file("bytes.db");
  for (size_t k = 1; k < 40; ++k) {
    const size_t keep = bytes.size() * k / 40 + (k * 97) % 512;
    writeText(path, bytes.substr(0, std::min(keep, bytes.size() - 1)));
    EXPECT_EQ(loadOutcome(path), "") << "truncated at " << keep;
  }
  std::mt19937 rng(13);
  for (int k = 0; k < 60; ++k) {
    std::string flipped = bytes;
    const size_t at = 100 + rng() % (bytes.size() - 100);
    flipped[at] = static_cast<char>(flipped[at] ^ (1 << (rng() % 8)));
    writeText(path, flipped);
    EXPECT_EQ(loadOutcome(path), "") << "bit flipped at " << at;
  }
}

// A writer killed inside a transaction leaves a hot rollback journal.  A read-only reader cannot
// roll it back: it says so and names the command that does, instead of calling the file
// corrupt; merge (a writer) rolls it back, and the committed data is intact.
TEST(Mutation, HotJournalOfADeadWriterIsExplainedAndRecovered) {
  TempDir dir;
  const std::string run = makeFullRun(dir);
  const size_t actions = loadRun(run).actions.at(0).size();
  ASSERT_GT(actions, 0u);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Db db(run, Db::Mode::ReadWrite);
    db.exec("PRAGMA cache_size=1; BEGIN IMMEDIATE; DELETE FROM actions; DELETE FROM plan;");
    _exit(0);  // dies mid-transaction: no rollback, no commit
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(std::filesystem::exists(run + "-journal"));
  try {
    loadRun(run);
    ADD_FAILURE() << "a hot journal was not noticed";
  } catch (const RunFileError& e) {
    EXPECT_NE(std::string(e.what()).find("the writer died mid-transaction"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("stagescope merge"), std::string::npos) << e.what();
  }
  mergeShards(run, {});
  EXPECT_FALSE(std::filesystem::exists(run + "-journal"));
  EXPECT_EQ(loadRun(run).actions.at(0).size(), actions);
}

}  // namespace
}  // namespace stagescope::storage::test
