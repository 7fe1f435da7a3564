// Typed errors for files that are not (readable) run files.
#include <gtest/gtest.h>

#include <fstream>

#include <filesystem>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/Schema.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

namespace stagescope::storage::test {
namespace {

using Kind = RunFileError::Kind;

// Loads `path` and returns the error kind; fails the test when no RunFileError is thrown.
Kind loadError(const std::string& path, std::string* message = nullptr) {
  try {
    loadRun(path);
  } catch (const RunFileError& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "loadRun(" << path << ") did not throw";
  return Kind::Corrupt;
}

// A merged run file with enough rows to span many pages.
std::string makeRun(const TempDir& dir) {
  const std::string run = dir.file("real.db");
  createRunFile(run, sampleRun(1, events::RecordLevel::Stats));
  writeActionsShard(shardPathFor(run, 0), 0, 20000);
  mergeShards(run, findShards(run));
  std::filesystem::remove(shardPathFor(run, 0));
  return run;
}

TEST(Errors, MissingFile) {
  TempDir dir;
  std::string msg;
  EXPECT_EQ(loadError(dir.file("nope.db"), &msg), Kind::NotFound);
  EXPECT_NE(msg.find("nope.db"), std::string::npos);
  EXPECT_THROW(loadTransferPayload(dir.file("nope.db"), 1), RunFileError);
}

TEST(Errors, TextAndEmptyFiles) {
  TempDir dir;
  writeText(dir.file("notes.txt"), "hello, this is a text file and not a database\n");
  std::string msg;
  EXPECT_EQ(loadError(dir.file("notes.txt"), &msg), Kind::NotARunFile);
  EXPECT_NE(msg.find("notes.txt"), std::string::npos);
  writeText(dir.file("empty.db"), "");
  EXPECT_EQ(loadError(dir.file("empty.db")), Kind::NotARunFile);
}

TEST(Errors, ForeignSqliteDatabase) {
  TempDir dir;
  const std::string path = dir.file("foreign.db");
  {
    Db db(path, Db::Mode::Create);
    db.exec("CREATE TABLE t(x); INSERT INTO t VALUES(1);");
  }
  std::string msg;
  EXPECT_EQ(loadError(path, &msg), Kind::NotARunFile);
  EXPECT_NE(msg.find("application_id"), std::string::npos);
  EXPECT_THROW(mergeShards(path, {}), RunFileError);
}

TEST(Errors, NewerFormatVersion) {
  TempDir dir;
  const std::string run = makeRun(dir);
  {
    Db db(run, Db::Mode::ReadWrite);
    db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion + 1));
  }
  std::string msg;
  EXPECT_EQ(loadError(run, &msg), Kind::NewerVersion);
  EXPECT_NE(msg.find("version " + std::to_string(kSchemaVersion + 1)), std::string::npos);
}

TEST(Errors, TruncatedCopyOfARealRunFile) {
  TempDir dir;
  const std::string run = makeRun(dir);
  ASSERT_NO_THROW(loadRun(run));
  const std::string bytes = readBytes(run);
  ASSERT_GT(bytes.size(), 64u * 1024);
  for (size_t keep : {bytes.size() / 2, size_t{4096}, size_t{50}}) {
    SCOPED_TRACE(keep);
    const std::string cut = dir.file("cut.db");
    writeText(cut, bytes.substr(0, keep));
    EXPECT_EQ(loadError(cut), Kind::Corrupt);
  }
}

TEST(Errors, ScribbledPagesNeverCrash) {
  TempDir dir;
  const std::string run = makeRun(dir);
  const std::string bytes = readBytes(run);
  // Overwrite a stretch of pages (not the header) with garbage: a typed error or a load.
  for (size_t at : {size_t{4096}, bytes.size() / 3, bytes.size() - 8192}) {
    std::string bad = bytes;
    for (size_t i = at; i < at + 6000 && i < bad.size(); ++i) bad[i] = static_cast<char>(i * 131);
    const std::string path = dir.file("bad.db");
    writeText(path, bad);
    try {
      LoadOptions opts;
      opts.verify = true;
      loadRun(path, opts);
      ADD_FAILURE() << "garbage at " << at << " was not detected";
    } catch (const RunFileError& e) {
      EXPECT_EQ(e.kind(), Kind::Corrupt) << e.what();
    }
  }
}

TEST(Errors, ShardCannotBeOpenedOverADirectory) {
  TempDir dir;
  EXPECT_THROW(ShardWriter::open(dir.path(), events::RecordLevel::Stats, 0), SqliteError);
  EXPECT_THROW(ShardWriter::open(dir.path(), events::RecordLevel::Stats, 0,
                                 ShardWriterOptions{.replaceExisting = false}),
               ShardExists);
  EXPECT_TRUE(std::filesystem::is_directory(dir.path()));
}

// replaceExisting = false (a hand-started worker): whatever is at the shard's path, or at its
// -wal/-journal, is refused and left byte-identical.
TEST(Errors, ShardThatMustBeNewRefusesAnExistingFile) {
  TempDir dir;
  for (const char* existing : {"", "-wal", "-shm", "-journal"}) {
    const std::string shard = dir.file(std::string("s") + existing + ".shard");
    const std::string blocker = shard + existing;
    writeText(blocker, "user data");
    try {
      ShardWriter::open(shard, events::RecordLevel::Stats, 0,
                        ShardWriterOptions{.replaceExisting = false});
      ADD_FAILURE() << blocker << " was not refused";
    } catch (const ShardExists& e) {
      EXPECT_EQ(e.path(), blocker);
    }
    std::ifstream in(blocker);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(text, "user data") << blocker;
  }
  // A new path is created, once: a second writer of it is refused.
  const std::string fresh = dir.file("new.shard");
  auto w = ShardWriter::open(fresh, events::RecordLevel::Stats, 0,
                             ShardWriterOptions{.replaceExisting = false});
  EXPECT_THROW(ShardWriter::open(fresh, events::RecordLevel::Stats, 0,
                                 ShardWriterOptions{.replaceExisting = false}),
               ShardExists);
  w->close();
}

}  // namespace
}  // namespace stagescope::storage::test
