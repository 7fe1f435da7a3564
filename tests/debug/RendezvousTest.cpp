// Rendezvous: ranks started by hand (as torchrun or Slurm start them: RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, rank 0 hosting the store) that disagree on the run stop at
// rendezvous — every rank, with the one line naming the field and the ranks, exit code 4,
// within the timeout (never a hang) — and `merge` then refuses the shard of the odd rank.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/Schema.h"
#include "storage/Sqlite.h"
#include "tests/debug/DebugUtil.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

namespace fs = std::filesystem;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A port nobody listens on right now (the kernel's choice for an ephemeral bind).
int freePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

struct WorkerExit {
  int code = -1;  // exit code; 128 + signal when killed (at the deadline)
  std::string output;
};

// Workers started by startWorkers: their pids and log files, by rank.
struct Workers {
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
};

// Starts one `stagescope worker CONFIG --out OUT` per entry of `configs` (rank = index) with
// the torchrun environment plus `extraEnv[rank]`; returns at once.
Workers startWorkers(const std::vector<std::string>& configs, const std::string& out,
                     const std::vector<std::vector<std::string>>& extraEnv, int port = 0) {
  const int world = static_cast<int>(configs.size());
  if (port == 0) port = freePort();
  Workers w;
  for (int r = 0; r < world; ++r) {
    w.logs.push_back(out + ".rank" + std::to_string(r) + ".log");
    std::vector<std::string> env = {
        "RANK=" + std::to_string(r),           "LOCAL_RANK=" + std::to_string(r),
        "WORLD_SIZE=" + std::to_string(world), "MASTER_ADDR=127.0.0.1",
        "MASTER_PORT=" + std::to_string(port), "PATH=/usr/bin:/bin"};
    if (r < static_cast<int>(extraEnv.size()))
      env.insert(env.end(), extraEnv[r].begin(), extraEnv[r].end());
    const std::string exe = stagescopeExe();
    std::vector<std::string> args = {exe, "worker", configs[r], "--out", out};
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      FILE* f = std::fopen(w.logs.back().c_str(), "w");
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
      execve(exe.c_str(), argv.data(), envp.data());
      _exit(127);
    }
    w.pids.push_back(pid);
  }
  return w;
}

// Waits for every worker (killed at `deadlineSeconds`); their exits and output, by rank.
std::vector<WorkerExit> waitWorkers(const Workers& w, int deadlineSeconds = 120) {
  const int world = static_cast<int>(w.pids.size());
  std::vector<WorkerExit> exits(world);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(deadlineSeconds);
  int left = world;
  while (left > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < world; ++r) {
        if (w.pids[r] != pid) continue;
        exits[r].code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > until) {
      for (int r = 0; r < world; ++r)
        if (exits[r].code < 0) kill(w.pids[r], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int r = 0; r < world; ++r) exits[r].output = readFile(w.logs[r]);
  return exits;
}

// startWorkers, then waitWorkers.
std::vector<WorkerExit> runWorkers(const std::vector<std::string>& configs, const std::string& out,
                                   const std::vector<std::vector<std::string>>& extraEnv,
                                   int deadlineSeconds = 120, int port = 0) {
  return waitWorkers(startWorkers(configs, out, extraEnv, port), deadlineSeconds);
}

class Rendezvous : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stagescope-rdv-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  // pipe3 (3 ranks) with a timeout generous enough for a busy machine, with `line` appended
  // after the top-level keys (it replaces a key of the same name).
  std::string config(const std::string& name, const std::string& key = "",
                     const std::string& value = "") {
    std::string text = readFile(debugConfig("pipe3"));
    auto setKey = [&](const std::string& k, const std::string& v) {
      const size_t at = text.find("\n" + k + " = ");
      ASSERT_NE(at, std::string::npos) << k;
      const size_t end = text.find('\n', at + 1);
      text.replace(at + 1, end - at - 1, k + " = " + v);
    };
    setKey("timeout_seconds", "30");
    if (!key.empty()) setKey(key, value);
    const std::string path = (dir_ / (name + ".toml")).string();
    std::ofstream(path) << text;
    return path;
  }
  fs::path dir_;
};

struct Mismatch {
  std::string name, key, value, expected;  // expected: the field text of the diagnosis
};
void PrintTo(const Mismatch& m, std::ostream* os) {
  *os << m.name;
}

class MixedConfigs : public Rendezvous, public ::testing::WithParamInterface<Mismatch> {};

TEST_P(MixedConfigs, EveryRankStopsNamingTheField) {
  const Mismatch& m = GetParam();
  const std::string same = config("same");
  // pipe3.toml's lr is under [optimizer]: set the top-level copy there instead.
  std::string odd;
  if (m.key == "lr") {
    std::string text = readFile(same);
    const size_t at = text.find("lr = 0.001");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 10, "lr = " + m.value);
    odd = (dir_ / "odd.toml").string();
    std::ofstream(odd) << text;
  } else {
    odd = config("odd", m.key, m.value);
  }
  const std::string out = (dir_ / "run.db").string();
  const auto t0 = std::chrono::steady_clock::now();
  auto exits = runWorkers({same, same, odd}, out, {});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string want = "ranks run different configs: " + m.expected;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(exits[r].code, 4) << "rank " << r << " output:\n" << exits[r].output;
    EXPECT_NE(exits[r].output.find(want), std::string::npos)
        << "rank " << r << " output:\n"
        << exits[r].output << "\nexpected: " << want;
    EXPECT_EQ(exits[r].output.find("hang"), std::string::npos) << exits[r].output;
  }
  // No rank waited out its 30 s timeout (the verdict is immediate; this is not a timing
  // assertion on speed, only that nobody hung to the timeout).
  EXPECT_LT(seconds, 30.0);

  // The shards: every rank recorded the diagnosis; merging with the majority's config refuses
  // rank 2's shard (another config hash) and records it so.
  const auto merged = runCli({"merge", out, "--config", same});
  EXPECT_NE(merged.exitCode, 0) << merged.output;
  EXPECT_NE(merged.output.find("run.db.rank2.shard: refused: config hash"), std::string::npos)
      << merged.output;
  storage::Db db = storage::openStagescopeFile(out, false);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM shards WHERE state = 'refused' AND rank = 2"), 1);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM shards WHERE state = 'merged'"), 2);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM diagnoses WHERE rank = 2"), 0);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM diagnoses WHERE kind = 'config_mismatch'"), 2);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, MixedConfigs,
    ::testing::Values(
        Mismatch{"seed", "seed", "99", "seed = 1234 on ranks 0-1, 99 on rank 2"},
        Mismatch{"lr", "lr", "0.5", "optimizer.lr = 0.001 on ranks 0-1, 0.5 on rank 2"},
        Mismatch{"iterations", "iterations", "5", "iterations = 2 on ranks 0-1, 5 on rank 2"},
        Mismatch{"microbatches", "microbatches", "6",
                 "microbatches = 4 on ranks 0-1, 6 on rank 2"}),
    [](const auto& info) { return info.param.name; });

TEST_F(Rendezvous, AnotherRunIdStopsEveryRank) {
  const std::string cfg = config("same");
  const std::string out = (dir_ / "run.db").string();
  auto exits = runWorkers({cfg, cfg, cfg}, out, {{}, {}, {"STAGESCOPE_RUN_ID=other"}});
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(exits[r].code, 4) << exits[r].output;
    EXPECT_NE(exits[r].output.find(
                  "ranks belong to different runs: run_id = run on ranks 0-1, other on rank 2"),
              std::string::npos)
        << exits[r].output;
  }
}

TEST_F(Rendezvous, SameConfigCompletesAndMerges) {
  // The same config written differently (comments, key order, 1e-3 for 0.001) is the same run.
  const std::string a = config("a");
  std::string text = readFile(a);
  text.replace(text.find("lr = 0.001"), 10, "lr = 1e-3  # same number");
  const std::string b = (dir_ / "b.toml").string();
  std::ofstream(b) << "# another spelling of a.toml\n" << text;
  const std::string out = (dir_ / "run.db").string();
  auto exits = runWorkers({a, b, a}, out, {});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(exits[r].code, 0) << exits[r].output;
  const auto merged = runCli({"merge", out, "--config", a});
  EXPECT_EQ(merged.exitCode, 0) << merged.output;
  EXPECT_NE(merged.output.find("run completed"), std::string::npos) << merged.output;
  // A completed run is one file, as `run` leaves it: its merged shards are gone.
  EXPECT_NE(merged.output.find("removed 3 merged shard(s): the run is one file"), std::string::npos)
      << merged.output;
  for (int r = 0; r < 3; ++r)
    EXPECT_FALSE(fs::exists(out + ".rank" + std::to_string(r) + ".shard")) << "rank " << r;
  EXPECT_EQ(runCli({"check", out}).exitCode, 0);
}

TEST_F(Rendezvous, RankOutsideTheRecordFilterCompletes) {
  // record.ranks = [0, 1]: rank 2 records no plan and no action by design; merge --config must
  // judge the run completed (it said "rank 2 stopped before its first action ... killed by a
  // signal or crashed", exit 10, on a run whose every rank exited 0).
  const std::string cfg = config("filtered", "level", "\"stats\"\nranks = [0, 1]");
  const std::string out = (dir_ / "run.db").string();
  auto exits = runWorkers({cfg, cfg, cfg}, out, {});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(exits[r].code, 0) << exits[r].output;
  const auto merged = runCli({"merge", out, "--config", cfg, "--keep-shards"});
  EXPECT_EQ(merged.exitCode, 0) << merged.output;
  EXPECT_NE(merged.output.find("run completed"), std::string::npos) << merged.output;
  for (int r = 0; r < 3; ++r)  // --keep-shards
    EXPECT_TRUE(fs::exists(out + ".rank" + std::to_string(r) + ".shard")) << "rank " << r;
}

TEST_F(Rendezvous, MergeWithoutConfigSaysWhatToAdd) {
  const std::string cfg = config("same");
  const std::string out = (dir_ / "run.db").string();
  auto exits = runWorkers({cfg, cfg, cfg}, out, {});
  for (int r = 0; r < 3; ++r) ASSERT_EQ(exits[r].code, 0) << exits[r].output;
  const auto merged = runCli({"merge", out});
  EXPECT_EQ(merged.exitCode, 2) << merged.output;
  EXPECT_EQ(lines(merged.output).size(), 1u) << merged.output;
  EXPECT_NE(merged.output.find("add --config CONFIG"), std::string::npos) << merged.output;
  EXPECT_FALSE(fs::exists(out));
}

// A run in motion (ranks started by hand with `worker`): a peek `merge` while they write merges
// a snapshot and leaves the status alone (it branded the run killed by SIGKILL for good), and
// `run -o` on its path names the live shard's writer (it called it foreign and said to remove
// it, with or without --force). Once the ranks end, `merge` judges the run completed.
TEST_F(Rendezvous, ALiveRunIsNeitherJudgedNorReplaced) {
  const std::string cfg = config("live", "iterations", "40");
  const std::string out = (dir_ / "live.db").string();
  const Workers w = startWorkers({cfg, cfg, cfg}, out, {});
  // Every rank has committed something: rank 2 (the last stage) printed a loss of iteration 2.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (std::chrono::steady_clock::now() < until &&
         readFile(w.logs[2]).find("iteration 2") == std::string::npos)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto peek = runCli({"merge", out, "--config", cfg});
  const auto replace = runCli({"run", cfg, "-o", out, "-q", "--force"});
  const auto exits = waitWorkers(w);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(exits[r].code, 0) << exits[r].output;
  ASSERT_EQ(peek.exitCode, 0) << peek.output;
  EXPECT_NE(peek.output.find("live, 3 of 3 ranks still writing"), std::string::npos) << peek.output;
  EXPECT_EQ(storage::loadRun(out).info.status, events::RunStatus::Running);
  EXPECT_EQ(replace.exitCode, 2) << replace.output;
  EXPECT_NE(replace.output.find("is being written by pid"), std::string::npos) << replace.output;
  EXPECT_EQ(replace.output.find("not a stagescope shard"), std::string::npos) << replace.output;
  const auto final = runCli({"merge", out});
  EXPECT_EQ(final.exitCode, 0) << final.output;
  const model::RunModel run = storage::loadRun(out);
  EXPECT_EQ(run.info.status, events::RunStatus::Completed) << run.info.statusReason;
  EXPECT_EQ(runCli({"check", out}).exitCode, 0);
}

TEST_F(Rendezvous, MergeRefusesAShardOfAnotherRun) {
  // Two complete runs of one config; rank 1's shard of the second run is put in place of the
  // first run's: same config hash, another run id.
  const std::string cfg = config("same");
  const std::string first = (dir_ / "first.db").string();
  const std::string second = (dir_ / "second.db").string();
  for (const auto& out : {first, second}) {
    auto exits = runWorkers({cfg, cfg, cfg}, out, {});
    for (int r = 0; r < 3; ++r) ASSERT_EQ(exits[r].code, 0) << exits[r].output;
  }
  fs::remove(first + ".rank1.shard");
  fs::copy_file(second + ".rank1.shard", first + ".rank1.shard");
  const auto merged = runCli({"merge", first, "--config", cfg});
  EXPECT_NE(merged.exitCode, 0) << merged.output;
  EXPECT_NE(merged.output.find("first.db.rank1.shard: refused: run id 'second' differs from the "
                               "run file's 'first'"),
            std::string::npos)
      << merged.output;
  storage::Db db = storage::openStagescopeFile(first, false);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM shards WHERE state = 'merged'"), 2);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM actions WHERE rank = 1"), 0);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM shards WHERE rank = 1 AND state = 'refused'"), 1);
}

TEST_F(Rendezvous, PortHeldByAnotherProgramIsDiagnosedWithinTheTimeout) {
  // A plain listening socket on MASTER_PORT: it accepts connections and never answers.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 64), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string cfg = config("short", "timeout_seconds", "3");
  const std::string out = (dir_ / "run.db").string();
  auto exits = runWorkers({cfg, cfg, cfg}, out, {}, 120, ntohs(a.sin_port));
  close(fd);
  for (int r = 0; r < 3; ++r) {
    // Exit 3 (timeout), not killed at the test's deadline, with one line naming the address.
    EXPECT_EQ(exits[r].code, 3) << "rank " << r << ":\n" << exits[r].output;
    EXPECT_EQ(lines(exits[r].output).size(), 1u) << exits[r].output;
    const std::string want = r == 0
                                 ? "cannot host the store at 127.0.0.1:"
                                 : "did not answer as a c10d TCPStore within timeout_seconds = 3";
    EXPECT_NE(exits[r].output.find(want), std::string::npos) << exits[r].output;
  }
}

TEST_F(Rendezvous, MergeNamesTheKilledRankNotAHang) {
  // Ranks started by hand (as torchrun starts them); rank 2 is SIGKILLed in iteration 1 and
  // records nothing; ranks 0-1 lose it.  Each survivor names it first (heartbeats, /proc);
  // merge --config must name the killed rank as the cause (failed), not the timeouts (hung),
  // like `stagescope run` does.
  std::string text = readFile(config("base", "timeout_seconds", "5"));
  text += "\n[[faults]]\nkind = \"kill\"\nrank = 2\niteration = 1\n";
  const std::string cfg = (dir_ / "kill.toml").string();
  std::ofstream(cfg) << text;
  const std::string out = (dir_ / "run.db").string();
  auto exits = runWorkers({cfg, cfg, cfg}, out, {});
  EXPECT_EQ(exits[2].code, 128 + SIGKILL) << exits[2].output;
  const auto merged = runCli({"merge", out, "--config", cfg});
  EXPECT_EQ(merged.exitCode, 10) << merged.output;
  // Named by what the survivors saw of its heartbeats: host, pid, process gone (same host).
  EXPECT_NE(merged.output.find("run failed: rank 2 (host "), std::string::npos) << merged.output;
  EXPECT_NE(merged.output.find("process gone: killed by"), std::string::npos) << merged.output;
  EXPECT_NE(merged.output.find("without a record of why"), std::string::npos) << merged.output;
  // Each survivor's first line is that root cause, not its own timeout.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(exits[r].output.rfind(
                  "stagescope: rank " + std::to_string(r) + ": root cause: rank 2 (host ", 0),
              0u)
        << exits[r].output;
  }
  storage::Db db = storage::openStagescopeFile(out, false);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM diagnoses WHERE kind = 'rank_killed' AND rank = 2"),
            1);
  EXPECT_GE(db.queryInt("SELECT count(*) FROM diagnoses WHERE kind = 'peer_dead' AND "
                        "waits_on_rank = 2"),
            1);
  // The signal a survivor saw end it (9 while rank 2 was a zombie; 0 once reaped: not known)
  // travels as a field from its peer_dead record to the rank_killed record merge wrote.
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM diagnoses WHERE kind = 'peer_dead' AND "
                        "waits_on_rank = 2 AND signal NOT IN (0, 9)"),
            0);
  EXPECT_EQ(db.queryInt("SELECT signal FROM diagnoses WHERE kind = 'rank_killed' AND rank = 2"),
            db.queryInt("SELECT max(signal) FROM diagnoses WHERE kind = 'peer_dead' AND "
                        "waits_on_rank = 2"));
}

}  // namespace
}  // namespace stagescope::testing
