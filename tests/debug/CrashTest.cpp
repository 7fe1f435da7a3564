// Crash safety: a rank SIGKILLed at several points, the launcher stopped with SIGTERM and
// SIGINT (Ctrl-C) mid-run, and the launcher SIGKILLed.  Each time the run file opens, says
// what happened, keeps what was committed before, and no process of the run is left.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "tests/debug/DebugUtil.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Pids of live processes whose command line mentions `needle` (the unique run path).
std::vector<int> processesMentioning(const std::string& needle) {
  std::vector<int> pids;
  DIR* proc = opendir("/proc");
  if (!proc) return pids;
  while (dirent* e = readdir(proc)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ifstream st("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');
    const bool zombie =
        paren != std::string::npos && stat.size() > paren + 2 && stat[paren + 2] == 'Z';
    if (!zombie && cmd.find(needle) != std::string::npos) pids.push_back(pid);
  }
  closedir(proc);
  return pids;
}

// Waits up to `seconds` for no process of the run to remain.
bool noStrays(const std::string& runPath, double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    if (processesMentioning(runPath).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return processesMentioning(runPath).empty();
}

// Ranks with at least one recorded action of `iteration`.
std::set<int> ranksWithActions(const model::RunModel& run, int iteration) {
  std::set<int> ranks;
  for (size_t r = 0; r < run.actions.size(); ++r) {
    for (const auto& a : run.actions[r]) {
      if (a.iteration == iteration) ranks.insert(static_cast<int>(r));
    }
  }
  return ranks;
}

// ---- a rank killed at several points ------------------------------------------------------

struct KillPoint {
  std::string name, fault;
  int rank;
  int committedIteration;  // every rank committed this iteration before the kill (-1: none)
};
void PrintTo(const KillPoint& k, std::ostream* os) {
  *os << k.name;
}

class RankKill : public ::testing::TestWithParam<KillPoint> {};

TEST_P(RankKill, RunFileSaysWhoDiedAndKeepsCommittedRecords) {
  const KillPoint& k = GetParam();
  RunOutput out = runStagescope(debugConfig("pipe3"), {"--fault", k.fault}, "kill-" + k.name, 120);
  EXPECT_EQ(out.exitCode, 10) << out.output;
  model::RunModel run = storage::loadRun(out.runPath);
  EXPECT_EQ(run.info.status, events::RunStatus::Failed);
  const std::string who = "rank " + std::to_string(k.rank) + " was killed by signal 9";
  EXPECT_NE(run.info.statusReason.find(who), std::string::npos) << run.info.statusReason;
  if (k.committedIteration >= 0) {
    EXPECT_EQ(ranksWithActions(run, k.committedIteration), (std::set<int>{0, 1, 2}));
  }
  // The killed rank's records up to the kill are there too (it committed iteration by
  // iteration), and no process of the run is left.
  EXPECT_TRUE(noStrays(out.runPath, 10));
}

INSTANTIATE_TEST_SUITE_P(
    Points, RankKill,
    ::testing::Values(
        KillPoint{"first_forward", "kill:iteration=0,microbatch=0,rank=1", 1, -1},
        KillPoint{"encoder_backward", "kill:iteration=0,microbatch=2,rank=0,direction=gradient", 0,
                  -1},
        KillPoint{"last_stage_second_iteration", "kill:iteration=1,microbatch=1,module=llm,stage=1",
                  2, 0},
        KillPoint{"middle_stage_last_microbatch",
                  "kill:iteration=1,microbatch=3,module=llm,stage=0,direction=gradient", 1, 0}),
    [](const ::testing::TestParamInfo<KillPoint>& info) { return info.param.name; });

// ---- the launcher signalled mid-run -------------------------------------------------------

struct Launched {
  pid_t pid = -1;
  std::string runPath;
};

// Starts `stagescope run` on a long version of pipe3 and returns once every rank has
// committed its first iterations: the last stage printed the loss of iteration 2, which
// needs every rank's iteration-1 messages, sent after each rank committed iteration 0.
Launched startLongRun(const std::string& tag) {
  Launched l;
  l.runPath = tempRunPath(tag);
  fs::remove(l.runPath);
  const std::string log = l.runPath + ".log";
  l.pid = fork();
  if (l.pid == 0) {
    std::freopen(log.c_str(), "w", stdout);
    std::freopen(log.c_str(), "a", stderr);
    const std::string exe = stagescopeExe(), cfg = debugConfig("pipe3");
    execl(exe.c_str(), exe.c_str(), "run", cfg.c_str(), "-o", l.runPath.c_str(), "--set",
          "iterations=5000", "--set", "timeout_seconds=60", static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto until = Clock::now() + std::chrono::seconds(90);
  while (Clock::now() < until) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("iteration 2  loss") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return l;
}

// Waits for the launcher; returns its wait status, or -1 after `seconds`.
int waitFor(pid_t pid, double seconds, double* took) {
  const auto t0 = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      *took = std::chrono::duration<double>(Clock::now() - t0).count();
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

class LauncherSignal : public ::testing::TestWithParam<int> {};

TEST_P(LauncherSignal, StopsAllRanksAndMarksTheRunKilled) {
  const int sig = GetParam();
  Launched l = startLongRun(std::string("launcher-") + sigabbrev_np(sig));
  ASSERT_EQ(storage::findShards(l.runPath).size(), 3u);
  ASSERT_EQ(processesMentioning(l.runPath).size(), 4u) << "launcher + 3 ranks";
  kill(l.pid, sig);
  double took = 0;
  const int status = waitFor(l.pid, 30, &took);
  ASSERT_NE(status, -1) << "the launcher did not exit within 30 s";
  // Ctrl-C stops every rank within a few seconds (generous on a busy 2-core machine).
  EXPECT_LT(took, 15.0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 10);
  EXPECT_TRUE(noStrays(l.runPath, 5));

  model::RunModel run = storage::loadRun(l.runPath);
  EXPECT_EQ(run.info.status, events::RunStatus::Killed);
  const std::string expect = sig == SIGINT   ? "SIGINT (Ctrl-C)"
                             : sig == SIGHUP ? "SIGHUP (its terminal was closed)"
                                             : "SIGTERM";
  EXPECT_NE(run.info.statusReason.find("interrupted: the launcher got " + expect),
            std::string::npos)
      << run.info.statusReason;
  EXPECT_FALSE(fs::exists(l.runPath + ".lock")) << "the run's lock outlived its launcher";
  // An interrupted run keeps its shards for a later `merge`.
  EXPECT_EQ(storage::findShards(l.runPath).size(), 3u);
  EXPECT_EQ(ranksWithActions(run, 0), (std::set<int>{0, 1, 2}));
  EXPECT_FALSE(run.transfers.empty());
}

// The launcher SIGKILLed (it can record nothing): its ranks end with it, and a later `merge`
// says they were stopped together — it blamed "rank 0 … killed by a signal (SIGKILL, the OOM
// killer)", a rank that had done nothing wrong.
TEST(LauncherKill, MergeSaysTheRanksStoppedTogetherAndBlamesNoRank) {
  Launched l = startLongRun("launcher-kill9");
  ASSERT_EQ(storage::findShards(l.runPath).size(), 3u);
  kill(l.pid, SIGKILL);
  double took = 0;
  ASSERT_NE(waitFor(l.pid, 30, &took), -1);
  EXPECT_TRUE(noStrays(l.runPath, 10)) << "the ranks outlived their launcher";
  const CliResult merged = runCli({"merge", l.runPath});
  const std::string want =
      "run killed: every rank (0, 1, 2) stopped without a record of why, their last records "
      "within ";
  EXPECT_NE(merged.output.find(want), std::string::npos) << merged.output;
  EXPECT_NE(merged.output.find("they were stopped together"), std::string::npos) << merged.output;
  EXPECT_EQ(merged.output.find("OOM"), std::string::npos) << merged.output;
  model::RunModel run = storage::loadRun(l.runPath);
  EXPECT_EQ(run.info.status, events::RunStatus::Killed);
}

// SIGHUP: the launcher's terminal (an SSH session) closed.
INSTANTIATE_TEST_SUITE_P(Signals, LauncherSignal, ::testing::Values(SIGINT, SIGTERM, SIGHUP),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string("SIG") + sigabbrev_np(info.param);
                         });

// `stagescope run ... | head -n 1`: whatever reads the launcher's output goes away after one
// line. The run goes on without output and completes, merged and unlocked (it used to die of
// SIGPIPE at iteration 0, leaving the file "running" with a stale lock).
TEST(LauncherOutput, ClosedOutputPipeDoesNotStopTheRun) {
  const std::string runPath = tempRunPath("launcher-epipe");
  fs::remove(runPath);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[1]);
    const std::string exe = stagescopeExe(), cfg = debugConfig("pipe3");
    execl(exe.c_str(), exe.c_str(), "run", cfg.c_str(), "-o", runPath.c_str(), "--set",
          "iterations=40", "--set", "timeout_seconds=60", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char ch = 0;  // the first line, then the reader is gone
  while (read(fds[0], &ch, 1) == 1 && ch != '\n') {
  }
  close(fds[0]);
  double took = 0;
  const int status = waitFor(pid, 240, &took);
  ASSERT_NE(status, -1) << "the launcher did not exit within 240 s";
  EXPECT_TRUE(WIFEXITED(status)) << "the launcher died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(noStrays(runPath, 5));
  model::RunModel run = storage::loadRun(runPath);
  EXPECT_EQ(run.info.status, events::RunStatus::Completed) << run.info.statusReason;
  EXPECT_EQ(ranksWithActions(run, 39), (std::set<int>{0, 1, 2}));
  EXPECT_FALSE(fs::exists(runPath + ".lock"));
  // A completed run is one file: no shard of it is left beside it (they stayed, 53 MB next to
  // a 39 MB run file).
  const std::string name = fs::path(runPath).filename().string() + ".";
  for (const auto& e : fs::directory_iterator(fs::path(runPath).parent_path())) {
    const std::string f = e.path().filename().string();
    EXPECT_FALSE(f.rfind(name, 0) == 0 && f.find(".shard") != std::string::npos) << f;
  }
}

// --keep-shards keeps them (the run file holds the same records).
TEST(LauncherOutput, KeepShardsKeepsTheMergedShards) {
  const std::string runPath = tempRunPath("keep-shards");
  fs::remove(runPath);
  const CliResult r = runCli({"run", debugConfig("tiny"), "-o", runPath, "-q", "--keep-shards"});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(storage::findShards(runPath).size(), 2u);
}

// SIGKILL cannot be caught: the ranks die with their parent (PR_SET_PDEATHSIG), the file
// still opens (status "running", shards unmerged), and `merge` recovers the records.
TEST(LauncherKill, RanksDieWithTheLauncherAndShardsMerge) {
  Launched l = startLongRun("launcher-sigkill");
  ASSERT_EQ(storage::findShards(l.runPath).size(), 3u);
  kill(l.pid, SIGKILL);
  double took = 0;
  ASSERT_NE(waitFor(l.pid, 10, &took), -1);
  EXPECT_TRUE(noStrays(l.runPath, 10));
  model::RunModel before = storage::loadRun(l.runPath);
  EXPECT_EQ(before.info.status, events::RunStatus::Running);
  // Before the merge, check leads with the one command that recovers the run, and the messages
  // whose other side is still in a shard are counted as its consequence, never listed one by one.
  CliResult unmerged = runCli({"check", l.runPath});
  EXPECT_EQ(unmerged.exitCode, 10) << unmerged.output;
  EXPECT_NE(unmerged.output.find("not all of the run's records are in its file: recover it with "
                                 "`stagescope merge " +
                                 l.runPath + "`, then check again"),
            std::string::npos)
      << unmerged.output;
  EXPECT_EQ(unmerged.output.find("send without receive"), std::string::npos) << unmerged.output;
  EXPECT_EQ(unmerged.output.find("receive without send"), std::string::npos) << unmerged.output;
  CliResult merged = runCli({"merge", l.runPath});
  EXPECT_EQ(merged.exitCode, 0) << merged.output;
  model::RunModel run = storage::loadRun(l.runPath);
  EXPECT_EQ(ranksWithActions(run, 0), (std::set<int>{0, 1, 2}));
  // `check` reports the unfinished run with the run_status code, without crashing.
  CliResult check = runCli({"check", l.runPath});
  EXPECT_EQ(check.exitCode, 10) << check.output;
}

}  // namespace
}  // namespace stagescope::testing
