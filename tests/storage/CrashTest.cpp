// A writer process killed with SIGKILL leaves a shard whose committed records all load.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "StorageTestUtil.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"

namespace stagescope::storage::test {
namespace {

using events::RecordLevel;

// Runs `child` in a forked process and waits for it; returns its wait status.
template <typename Fn>
int inChild(Fn child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    child();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// Actions of rank 0 must be exactly seq 0..n-1 of iteration 0 (a committed prefix).
void expectPrefix(const model::RunModel& m, size_t atLeast) {
  ASSERT_FALSE(m.actions.empty());
  const auto& a = m.actions[0];
  EXPECT_GE(a.size(), atLeast);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i].seq, static_cast<int>(i));
}

TEST(Crash, SelfKilledWriterKeepsEverythingFlushed) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(1, RecordLevel::Stats));
  const std::string shard = shardPathFor(run, 0);
  const int status = inChild([&] {
    ShardWriterOptions opts;
    opts.commitIntervalMs = 60000;  // only flush() and full batches commit
    auto w = ShardWriter::open(shard, RecordLevel::Stats, 0, opts);
    w->rank(sampleRank(0));
    int seq = 0;
    for (; seq < 1000; ++seq) w->action(sampleAction(0, 0, seq));
    w->flush();
    for (; seq < 1500; ++seq) w->action(sampleAction(0, 0, seq));
    w->flush();
    for (; seq < 1600; ++seq) w->action(sampleAction(0, 0, seq));  // may be lost
    ::raise(SIGKILL);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  // The shard itself opens (as a partial run) ...
  const model::RunModel fromShard = loadRun(shard);
  EXPECT_TRUE(fromShard.partial);
  expectPrefix(fromShard, 1500);
  EXPECT_LE(fromShard.actions[0].size(), 1600u);
  // ... and merges into the run file.
  const MergeResult res = mergeShards(run, findShards(run));
  EXPECT_EQ(res.merged, 1);
  const model::RunModel m = loadRun(run);
  EXPECT_FALSE(m.partial);
  expectPrefix(m, 1500);
}

TEST(Crash, WriterKilledByParentMidStream) {
  TempDir dir;
  const std::string run = dir.file("run.db");
  createRunFile(run, sampleRun(1, RecordLevel::Stats));
  const std::string shard = shardPathFor(run, 0);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ShardWriterOptions opts;
    opts.commitIntervalMs = 5;
    auto w = ShardWriter::open(shard, RecordLevel::Full, 0, opts);
    for (int seq = 0;; ++seq) {
      w->action(sampleAction(0, 0, seq));
      auto t = sampleTransfer(events::Side::Send, 0, 1, 0, seq);
      w->transfer(std::move(t));
      if (seq % 500 == 499) {
        w->flush();
        const int durable = seq + 1;  // report what is committed
        if (::write(fds[1], &durable, sizeof durable) != sizeof durable) ::_exit(1);
      }
    }
  }
  ::close(fds[1]);
  int durable = 0, got = 0;
  while (durable < 5000 && ::read(fds[0], &got, sizeof got) == sizeof got) durable = got;
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_GE(durable, 5000);

  ASSERT_EQ(mergeShards(run, findShards(run)).merged, 1);
  LoadOptions opts;
  opts.payloads = true;
  opts.verify = true;
  const model::RunModel m = loadRun(run, opts);
  expectPrefix(m, static_cast<size_t>(durable));
  EXPECT_GE(m.transfers.size(), static_cast<size_t>(durable));
  for (const auto& t : m.transfers) ASSERT_EQ(t.payload.size(), 1024u);
}

TEST(Crash, FlushAfterWriterFailureThrows) {
  TempDir dir;
  auto w = ShardWriter::open(dir.file("x.rank0.shard"), RecordLevel::Stats, 0);
  w->action(sampleAction(0, 0, 0));
  EXPECT_NO_THROW(w->flush());
  EXPECT_EQ(w->committedRecords(), 1u);
  EXPECT_TRUE(w->error().empty());
  w->close();
  w->action(sampleAction(0, 0, 1));  // after close: dropped, no crash
  EXPECT_NO_THROW(w->flush());
}

}  // namespace
}  // namespace stagescope::storage::test
