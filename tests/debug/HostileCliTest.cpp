// The hostile command-line and output-path corpus (tests/debug/hostile/cli.cases) through the
// reusable HostileHarness, plus the scenarios a one-line table cannot express: a full disk
// (RLIMIT_FSIZE) that fails a run and a later merge that re-judges it, the lock naming its
// holder, and `--version`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "storage/RunReader.h"
#include "tests/debug/DebugUtil.h"
#include "tests/debug/HostileHarness.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

namespace fs = std::filesystem;

// The stagescope that makes the fixture runs (this build's, or another build's with the engine
// when this one has none), and whether this build can run `run`/`worker` cases.
const std::string kFixtureExe = STAGESCOPE_FIXTURE_EXE;
#ifdef STAGESCOPE_HAVE_ENGINE
constexpr bool kHaveEngine = true;
#else
constexpr bool kHaveEngine = false;
#endif
#ifdef STAGESCOPE_HAVE_UI
constexpr bool kHaveUi = true;  // `gui` cases: the output policy of its screenshots
#else
constexpr bool kHaveUi = false;
#endif

// A 1x1 RGBA PNG that stagescope did not write (no "stagescope viewer" tEXt chunk).
constexpr char kForeignPng[] =
    "\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x01\x00\x00"
    "\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\x0d\x49\x44\x41\x54\x78\x9c\x63"
    "\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99\x3d\x1d\x00\x00\x00\x00\x49\x45\x4e\x44"
    "\xae\x42\x60\x82";

// STAGESCOPE_HOSTILE_CLI_CASES names another table (e.g. generated cases for a stress run).
const std::string kCases =
    std::getenv("STAGESCOPE_HOSTILE_CLI_CASES")
        ? std::getenv("STAGESCOPE_HOSTILE_CLI_CASES")
        : std::string(STAGESCOPE_SOURCE_DIR) + "/tests/debug/hostile/cli.cases";

// Fixture files shared by every case, built once per build tree (several test processes may
// start at once: the first builds them under a lock, the others wait).  Rebuilt when the
// stagescope executable or the engine next to it is newer than them.
const Fixtures& fixtures() {
  static const Fixtures built = [] {
    const fs::path dir = STAGESCOPE_FIXTURE_DIR;
    fs::create_directories(dir);
    const int lockFd = ::open((dir / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ::flock(lockFd, LOCK_EX);
    Fixtures f;
    f["cfg"] = debugConfig("tiny");
    for (const char* name : {"run", "run2", "shard", "foreign", "html", "md", "cjson", "junit",
                             "kjson", "trace", "png"}) {
      f[name] = (dir / name).string();
    }
    f["run"] += ".db";
    f["run2"] += ".db";
    const fs::path ready = dir / "ready";
    std::error_code ec;
    const bool fresh = fs::exists(ready) && fs::last_write_time(ready, ec) > builtAt(kFixtureExe);
    if (!fresh) {
      fs::remove(ready);
      for (const auto& [name, path] : f) {
        if (name == "cfg") continue;
        fs::remove(path);
        for (const auto& s : {".rank0.shard", ".rank1.shard", ".lock", "-journal"}) {
          fs::remove(path + s);
        }
      }
      // The fixtures must be written; what `check`/`compare` conclude about them does not
      // matter here (any documented verdict code).
      auto must = [](const CliResult& r, const std::string& what) {
        if (r.exitCode != 0 && (r.exitCode < 10 || r.exitCode > 18)) {
          throw std::runtime_error("fixture " + what + " failed: " + r.output);
        }
      };
      // --keep-shards: the corpus copies the rank shards of these runs.
      must(runCliWith(kFixtureExe, {"run", f["cfg"], "-o", f["run"], "-q", "--keep-shards"}),
           "run");
      must(runCliWith(kFixtureExe, {"run", f["cfg"], "-o", f["run2"], "-q", "--keep-shards"}),
           "run2");
      fs::copy_file(f["run"] + ".rank0.shard", f["shard"]);
      sqlite3* db = nullptr;
      sqlite3_open(f["foreign"].c_str(), &db);
      sqlite3_exec(db, "CREATE TABLE recipes(name TEXT); INSERT INTO recipes VALUES('bread');",
                   nullptr, nullptr, nullptr);
      sqlite3_close(db);
      must(runCliWith(kFixtureExe, {"compare", f["run"], f["run2"], "--html", f["html"], "--md",
                                    f["md"], "--json", f["cjson"]}),
           "compare");
      must(
          runCliWith(kFixtureExe, {"check", f["run"], "--junit", f["junit"], "--json", f["kjson"]}),
          "check");
      must(runCliWith(kFixtureExe, {"export", f["run"], "--chrome-trace", f["trace"]}), "export");
      std::ofstream(f["png"], std::ios::binary).write(kForeignPng, sizeof kForeignPng - 1);
      std::ofstream(ready) << "ok\n";
    }
    // live.cases: pipe3 whose run waits 6 s in iteration 1 (a delay fault on the bridge's
    // first activation), so the cases' commands meet it live on a busy machine too.
    f["livecfg"] = (dir / "live.toml").string();
    std::ifstream pipe3(debugConfig("pipe3"), std::ios::binary);
    std::string live((std::istreambuf_iterator<char>(pipe3)), std::istreambuf_iterator<char>());
    live.replace(live.find("iterations = 2"), 14, "iterations = 3");
    live.replace(live.find("timeout_seconds = 3"), 19, "timeout_seconds = 60");
    live +=
        "\n[[faults]]\nkind = \"delay\"\niteration = 1\nmicrobatch = 0\nmodule = \"vision\"\n"
        "stage = 0\ndirection = \"activation\"\ndelay_seconds = 6\n";
    std::ofstream(f["livecfg"], std::ios::binary | std::ios::trunc) << live;
    ::flock(lockFd, LOCK_UN);
    ::close(lockFd);
    return f;
  }();
  return built;
}

std::string testName(const ::testing::TestParamInfo<HostileCase>& info) {
  return testNameOf(info.param);
}

// The table's cases this build can run (no `run`/`worker` without the engine, no `gui`
// without the viewer).
std::vector<HostileCase> cliCases() {
  std::vector<HostileCase> cases = runnable(loadCases(kCases), kHaveEngine);
  if (!kHaveUi)
    std::erase_if(cases,
                  [](const HostileCase& c) { return !c.args.empty() && c.args[0] == "gui"; });
  return cases;
}

// The "live runs" class (tests/debug/hostile/live.cases): commands that look at a run while
// its ranks write it.  Every case starts its live run with this build's `run` or `worker`, so a
// build without the engine (the sanitizer pass) has none of them; the main pass runs them all.
std::vector<HostileCase> liveCases() {
  if (!kHaveEngine) return {};
  return runnable(loadCases(std::string(STAGESCOPE_SOURCE_DIR) + "/tests/debug/hostile/live.cases"),
                  kHaveEngine);
}

class HostileCli : public ::testing::TestWithParam<HostileCase> {};

TEST_P(HostileCli, KeepsFilesAndSaysWhatWasWrong) {
  const HostileCase& c = GetParam();
  const CaseResult r = runHostileCase(c, fixtures());
  for (const auto& s : c.setup) {
    // Which way a signal case went (finished first, or died of the signal), for the log.
    if (s.rfind("signal:", 0) == 0 && !r.runs.empty()) {
      std::printf("%s: %s -> exit %d\n", label(c).c_str(), s.c_str(), r.runs[0].exitCode);
    }
  }
  const std::string detail = describeRuns(r);
  for (const auto& f : r.failures) ADD_FAILURE() << label(c) << ": " << f << detail;
}

INSTANTIATE_TEST_SUITE_P(Corpus, HostileCli, ::testing::ValuesIn(cliCases()), testName);
INSTANTIATE_TEST_SUITE_P(Live, HostileCli, ::testing::ValuesIn(liveCases()), testName);

// The classes and their sizes (printed for the record; the table must keep its breadth).
TEST(HostileCorpus, CountsByClass) {
  std::map<std::string, int> count;
  for (const auto& c : loadCases(kCases)) ++count[c.cls];
  for (const auto& [cls, n] : count) std::printf("%-14s %d cases\n", cls.c_str(), n);
  EXPECT_GE(count["output-path"], 30);
  EXPECT_GE(count["report-output"], 30);
  EXPECT_GE(count["cli-flag"], 30);
}

TEST(HostileCli, VersionNamesEveryComponent) {
  const CliResult r = runCli({"--version"});
  EXPECT_EQ(r.exitCode, 0) << r.output;
  for (const char* what : {"stagescope 0.", kHaveEngine ? "LibTorch 2." : "LibTorch: none",
                           "SQLite 3.", "run file format 3"}) {
    EXPECT_NE(r.output.find(what), std::string::npos) << what << " in\n" << r.output;
  }
}

// While another process holds the run file's lock, `run` and `merge` on it fail at once with
// one line naming the holder's pid and host, and touch nothing.
TEST(HostileCli, LockedRunFileNamesItsHolder) {
  const std::string dir = tempRunPath("locked");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string out = dir + "/run.db";
  fs::copy_file(fixtures().at("run"), out);
  const int fd = ::open((out + ".lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  const std::string holder = "stagescope lock: pid 4242 on host node7\n";
  ASSERT_EQ(::write(fd, holder.data(), holder.size()), static_cast<ssize_t>(holder.size()));
  std::vector<std::vector<std::string>> commands = {{"merge", out}};
  if (kHaveEngine) commands.push_back({"run", debugConfig("tiny"), "-o", out, "-q", "--force"});
  for (const auto& args : commands) {
    const CliResult r = runCli(args, 60);
    EXPECT_EQ(r.exitCode, 1) << args[0] << "\n" << r.output;
    EXPECT_EQ(lines(r.output).size(), 1u) << r.output;
    EXPECT_NE(r.output.find("being written by stagescope pid 4242 on host node7"),
              std::string::npos)
        << r.output;
  }
  ::close(fd);
  std::ifstream a(fixtures().at("run"), std::ios::binary), b(out, std::ios::binary);
  const std::string before((std::istreambuf_iterator<char>(a)), {}),
      after((std::istreambuf_iterator<char>(b)), {});
  EXPECT_TRUE(before == after) << "the locked run file was changed";
}

int shell(const std::string& command, std::string* output) {
  FILE* p = popen(("bash -c \"" + command + "\" 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) output->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Output that cannot be written is an error, not a silent exit 0 (`check > /dev/full` exited 0);
// the same command into a writable sink passes (`run`'s reader that leaves early: CrashTest).
TEST(HostileCli, UnwritableStandardOutputFailsTheCommand) {
  std::string output;
  const std::string check = "'" + stagescopeExe() + "' check '" + fixtures().at("run") + "'";
  EXPECT_EQ(shell(check + " > /dev/full", &output), 1) << output;
  EXPECT_NE(output.find("error: standard output could not be written"), std::string::npos)
      << output;
  output.clear();
  EXPECT_EQ(shell(check + " > /dev/null", &output), 0) << output;
}

// `-` sends a text report to standard output (docs/commands.md "Output files", "Standard
// output"): stdout holds that report alone - `check RUN --json - | python3 -m json.tool`
// parses - the human text goes to stderr, and no file named `-` is written.
TEST(HostileCli, DashWritesTheReportAloneToStandardOutput) {
  const std::string dir = tempRunPath("dash-stdout");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string exe = "'" + stagescopeExe() + "'";
  const std::string a = "'" + fixtures().at("run") + "'", b = "'" + fixtures().at("run2") + "'";
  struct Case {
    // judge: a command reading the whole report on its stdin (sed, never head: a reader that
    // leaves early would end the command before it writes its other reports)
    std::string args, judge;
  };
  const std::vector<Case> cases = {
      {"check " + a + " --json -", "python3 -m json.tool"},
      {"check " + a + " --junit -", "sed -n 1p | grep -q '^<?xml'"},
      {"check " + a + " --json - --junit " + dir + "/r.xml", "python3 -m json.tool"},
      {"compare " + a + " " + b + " --json -", "python3 -m json.tool"},
      {"compare " + a + " " + b + " --md -", "sed -n 1p | grep -q '^## stagescope compare'"},
      {"compare " + a + " " + b + " --html - --json " + dir + "/c.json",
       "sed -n 1p | grep -qx '<!DOCTYPE html>'"},
  };
  for (const auto& c : cases) {
    std::string output;
    const std::string err = dir + "/err";
    EXPECT_EQ(shell("cd '" + dir + "' && " + exe + " " + c.args + " 2>'" + err + "' | " + c.judge,
                    &output),
              0)
        << c.args << "\n"
        << output;
    std::ifstream in(err);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    // The human text is not lost: check's findings, compare's summary, on stderr.
    EXPECT_TRUE(text.find("exit") != std::string::npos ||
                text.find("## stagescope compare") != std::string::npos)
        << c.args << "\nstderr:\n"
        << text;
    EXPECT_FALSE(fs::exists(dir + "/-")) << c.args << ": wrote a file named '-'";
  }
  // The reports given a path were written there, as before.
  EXPECT_TRUE(fs::exists(dir + "/r.xml"));
  EXPECT_TRUE(fs::exists(dir + "/c.json"));
  fs::remove_all(dir);
}

// A value of 120 kB is quoted in the error line by its head, tail and size (events::shownValue),
// never echoed whole; the line still names what was wrong.
TEST(HostileCli, LongValuesAreCappedInTheErrorLine) {
  const std::string big(120000, 'x');
  const std::string cfg = debugConfig("tiny");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"plan", cfg, "--set", big}, "expected key=value"},
      {{"plan", cfg, "--set", "dtype=" + big}, "expected one of float32, bfloat16"},
      {{"plan", cfg, "--set", big + "=1"}, "unknown key"},
      {{"plan", cfg, "--set", "modules." + big + ".tp=1"}, "no module with this name"},
      {{"check", fixtures().at("run"), "--tol", big}, "--tol"},
      {{big}, "unknown command"},
  };
  for (const auto& [args, what] : cases) {
    const CliResult r = runCli(args, 60);
    EXPECT_EQ(r.exitCode, 2) << args[0] << ": " << r.output.substr(0, 300);
    EXPECT_LT(r.output.size(), 1200u) << args[0] << ": " << r.output.substr(0, 300);
    EXPECT_NE(r.output.find(" bytes)"), std::string::npos) << r.output.substr(0, 1200);
    EXPECT_NE(r.output.find(what), std::string::npos) << r.output.substr(0, 1200);
  }
}

// A run whose files cannot grow (a full disk: RLIMIT_FSIZE on the launcher and its ranks)
// ends `failed` with the reason, exit 10, no abort.
TEST(HostileCli, FullDiskFailsTheRunWithAReason) {
  if (!kHaveEngine) GTEST_SKIP() << "`run` needs the engine, which this build leaves out";
  const std::string dir = tempRunPath("fulldisk");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string out = dir + "/run.db";
  std::string output;
  // 144 KiB: room for the new run file (its tables, views and triggers: its creation needs more
  // than 128 KiB since the run_origin and job_schedule tables), not for the run's records.
  const int code = shell("ulimit -f 144 && '" + stagescopeExe() + "' run '" + debugConfig("tiny") +
                             "' -o '" + out + "' -q",
                         &output);
  EXPECT_EQ(code, 10) << output;
  EXPECT_EQ(output.find("terminate called"), std::string::npos) << output;
  const model::RunModel failed = storage::loadRun(out);
  EXPECT_EQ(failed.info.status, events::RunStatus::Failed) << output;
  EXPECT_FALSE(failed.info.statusReason.empty());
}

// The records of a run wait in its shards when the merge cannot write the run file; a later
// `merge`, once space is back, completes the run file and judges the status again.  The limit
// (112 KiB) holds the empty format-3 run file (about 92 KiB: tables, views, triggers) but not
// the merged one (132 KiB).
TEST(HostileCli, MergeAfterAFullDiskRejudgesTheRun) {
  const std::string dir = tempRunPath("fullmerge");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string out = dir + "/run.db";
  for (int r = 0; r < 2; ++r) {
    fs::copy_file(fixtures().at("run") + ".rank" + std::to_string(r) + ".shard",
                  out + ".rank" + std::to_string(r) + ".shard");
  }
  std::string output;
  // 136 blocks of 512 bytes: room for the new run file's schema (about 60 KB), not for the
  // merged rows (the run file of this merge is about 160 KB).
  const int full = shell("ulimit -f 136 && '" + stagescopeExe() + "' merge '" + out +
                             "' --config '" + debugConfig("tiny") + "'",
                         &output);
  EXPECT_NE(full, 0) << output;
  EXPECT_TRUE(full == 1 || full == 10) << output;
  EXPECT_EQ(output.find("terminate called"), std::string::npos) << output;
  EXPECT_NE(storage::loadRun(out).info.status, events::RunStatus::Completed);

  const CliResult merged = runCli({"merge", out});
  EXPECT_EQ(merged.exitCode, 0) << merged.output;
  const model::RunModel after = storage::loadRun(out);
  EXPECT_EQ(after.info.status, events::RunStatus::Completed) << merged.output;
  EXPECT_EQ(after.actions.size(), 2u);
}

// What `run` leaves when its own merge fails for lack of space (status failed, records in the
// shards): `merge` re-judges it completed.  A failed run whose ranks did not finish stays failed.
TEST(HostileCli, MergeRejudgesAFailedMergeButNotAFailedRank) {
  const std::string dir = tempRunPath("rejudge");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string out = dir + "/run.db";
  fs::copy_file(fixtures().at("run"), out);
  for (int r = 0; r < 2; ++r) {
    fs::copy_file(fixtures().at("run") + ".rank" + std::to_string(r) + ".shard",
                  out + ".rank" + std::to_string(r) + ".shard");
  }
  auto setStatus = [&](const std::string& status, const std::string& reason) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(out.c_str(), &db), SQLITE_OK);
    const std::string sql =
        "UPDATE run SET status='" + status + "', status_reason='" + reason + "' WHERE id=1";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  };
  setStatus("failed", "the ranks completed but their shards were not all merged (disk full)");
  CliResult merged = runCli({"merge", out});
  EXPECT_EQ(merged.exitCode, 0) << merged.output;
  EXPECT_EQ(storage::loadRun(out).info.status, events::RunStatus::Completed) << merged.output;

  // Rank 1's shard is gone and its records with it: the run cannot be judged completed.
  fs::remove(out);
  fs::remove(out + ".rank1.shard");
  ASSERT_EQ(runCli({"merge", out, "--config", debugConfig("tiny")}).exitCode, 10);
  setStatus("killed", "interrupted");
  merged = runCli({"merge", out});
  EXPECT_EQ(merged.exitCode, 0) << merged.output;
  EXPECT_EQ(storage::loadRun(out).info.status, events::RunStatus::Killed) << merged.output;
}

}  // namespace
}  // namespace stagescope::testing
