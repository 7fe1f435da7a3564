// The hostile config and run-file corpus (tests/debug/hostile/config.cases, runfile.cases)
// through HostileHarness: bad values given by file or `--set` (types, overflow, huge, zero,
// negative, NaN/Inf, unicode, control characters, SQL/HTML metacharacters, unknown keys) and
// damaged run files (truncated at many offsets, bit flips, out-of-range values, foreign and
// newer files, a hot journal, WAL leftovers).  Each case: a documented exit code, at most two
// lines on stderr naming the problem, every pre-existing file byte-identical, no stray process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

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

const std::string kTables = std::string(STAGESCOPE_SOURCE_DIR) + "/tests/debug/hostile/";

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeAll(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// Runs `statements` on p; a statement that fails stops the fixture build (an unmutated copy
// would make its cases pass for nothing).
void sql(const fs::path& p, const std::string& statements) {
  sqlite3* db = nullptr;
  sqlite3_open(p.c_str(), &db);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, statements.c_str(), nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error(p.string() + ": " + statements + ": " + message);
}

// A copy of `run` whose writer was killed mid-transaction (a hot rollback journal).
void hotJournal(const fs::path& run, const fs::path& out) {
  fs::copy_file(run, out, fs::copy_options::overwrite_existing);
  const pid_t child = fork();
  if (child == 0) {
    sqlite3* db = nullptr;
    sqlite3_open(out.c_str(), &db);
    sqlite3_exec(db, "PRAGMA cache_size=1; BEGIN IMMEDIATE; DELETE FROM actions; DELETE FROM plan;",
                 nullptr, nullptr, nullptr);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
}

// Fixtures: the tiny config, a real run of it, and damaged copies of that run (names used by
// the tables' copy:).  Built once per build tree under a lock.
const Fixtures& fixtures() {
  static const Fixtures built = [] {
    const fs::path dir = fs::path(STAGESCOPE_FIXTURE_DIR) / "inputs";
    fs::create_directories(dir);
    const int lockFd = ::open((dir / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ::flock(lockFd, LOCK_EX);
    Fixtures f;
    f["cfg"] = debugConfig("tiny");
    const fs::path run = dir / "run.db";
    f["run"] = run.string();
    f["shard"] = run.string() + ".rank0.shard";
    const fs::path ready = dir / "ready";
    std::error_code ec;
    const bool fresh = fs::exists(ready) && fs::last_write_time(ready, ec) > builtAt(kFixtureExe);
    if (!fresh) {
      for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().filename() != ".lock") fs::remove_all(e.path());
      }
      const CliResult r =
          runCliWith(kFixtureExe, {"run", f["cfg"], "-o", run.string(), "-q", "--keep-shards"});
      if (r.exitCode != 0) throw std::runtime_error("fixture run failed: " + r.output);
      // The same run at level full with the reference: payloads in every table that has them.
      const CliResult full =
          runCliWith(kFixtureExe, {"run", f["cfg"], "-o", (dir / "full.db").string(), "-q",
                                   "--record", "full", "--reference"});
      if (full.exitCode != 0) throw std::runtime_error("fixture run failed: " + full.output);
    }
    f["full"] = (dir / "full.db").string();
    const std::string bytes = readAll(run);
    auto add = [&](const std::string& name, auto make) {
      const fs::path p = dir / (name + ".db");
      f[name] = p.string();
      if (!fresh) make(p);
    };
    for (int k = 0; k < 24; ++k) {  // truncated at 24 offsets spread over the file
      add("trunc" + std::to_string(k), [&](const fs::path& p) {
        writeAll(p, bytes.substr(0, bytes.size() * k / 24 + (k * 131) % 1000));
      });
    }
    for (int k = 0; k < 24; ++k) {  // one bit flipped, at 24 places
      add("flip" + std::to_string(k), [&](const fs::path& p) {
        std::string b = bytes;
        const size_t at = 100 + (static_cast<size_t>(k) * 7919 * 13) % (b.size() - 100);
        b[at] = static_cast<char>(b[at] ^ (1 << (k % 8)));
        writeAll(p, b);
      });
    }
    const std::map<std::string, std::string> mutations = {
        {"world_huge", "UPDATE run SET world_size = 2147483647"},
        {"world_4e8", "UPDATE run SET world_size = 400000000"},
        {"world_negative", "UPDATE run SET world_size = -5"},
        {"iterations_huge", "UPDATE run SET iterations = 2147483647"},
        {"microbatches_huge", "UPDATE run SET microbatches = 2147483647"},
        {"level_unknown", "UPDATE run SET level = 'loud'"},
        {"status_unknown", "UPDATE run SET status = '<b>done</b>'"},
        {"rank_huge", "UPDATE actions SET rank = 1000000"},
        {"iteration_huge", "UPDATE actions SET iteration = 2147483647"},
        {"microbatch_huge", "UPDATE plan SET microbatch = 2147483647"},
        {"peers_bad", "UPDATE actions SET peers = 'x,y'"},
        {"shape_huge", "UPDATE transfers SET shape = '2147483647,2147483647,2147483647'"},
        {"shape_negative", "UPDATE transfers SET shape = '-1,2'"},
        {"transfer_rank_negative", "UPDATE transfers SET src_rank = -7"},
        {"gradient_full_shape", "UPDATE gradients SET full_shape = '2147483647,2147483647'"},
        {"gradient_partition", "UPDATE gradients SET partition_dim = 0, partition_offset = -4"},
        {"loss_iteration", "UPDATE losses SET iteration = 2147483647"},
        {"module_tp_zero", "UPDATE modules SET tp = 0"},
        {"ranks_stage_huge", "UPDATE ranks SET global_stage = 2147483647"},
        {"diagnosis_rank", "UPDATE diagnoses SET rank = 2147483647"},
        {"drop_transfers", "DROP TABLE transfers_rows"},
        {"newer_version", "PRAGMA user_version = 9999"},
        {"foreign_app", "PRAGMA application_id = 1234"},
        // Mutated schemas: missing tables and columns, wrong types, huge and negative values,
        // views in place of tables, triggers (which a writer such as `merge` would fire).
        {"drop_run", "DROP TABLE run"},
        {"drop_modules", "DROP TABLE modules"},
        {"drop_ranks", "DROP TABLE ranks"},
        {"drop_plan", "DROP VIEW plan; DROP TABLE plan_rows"},
        {"drop_actions", "DROP VIEW actions; DROP TABLE actions_rows"},
        {"drop_gradients", "DROP VIEW gradients; DROP TABLE gradients_rows"},
        {"drop_losses", "DROP TABLE losses"},
        {"drop_diagnoses", "DROP TABLE diagnoses"},
        {"drop_waits", "DROP TABLE waits"},
        {"drop_shards", "DROP TABLE shards"},
        {"drop_everything",
         "DROP TABLE run; DROP TABLE modules; DROP TABLE ranks; DROP VIEW plan;"
         "DROP VIEW actions; DROP VIEW transfers; DROP TABLE shards"},
        {"no_column_actions_seq",
         "DROP VIEW actions; DROP INDEX IF EXISTS actions_by_rank;"
         "ALTER TABLE actions_rows DROP COLUMN seq"},
        {"no_column_run_status", "ALTER TABLE run DROP COLUMN status"},
        {"extra_column", "ALTER TABLE actions_rows ADD COLUMN surprise TEXT DEFAULT 'x'"},
        {"text_in_integer", "UPDATE actions_rows SET iteration = 'abc', seq = 'x'"},
        {"blob_in_text", "UPDATE run SET config_text = x'00ff00fe', run_id = x'1b5b326a'"},
        {"real_world_size", "UPDATE run SET world_size = 2.5"},
        {"null_world_size", "UPDATE run SET world_size = NULL, iterations = NULL"},
        {"null_everything",
         "UPDATE actions_rows SET iteration = NULL, seq = NULL, microbatch = NULL, stage = NULL"},
        {"huge_blob",
         "UPDATE transfers_rows SET payload = zeroblob(16000000) WHERE id = "
         "(SELECT min(id) FROM transfers_rows)"},
        {"negative_bytes", "UPDATE transfers_rows SET bytes = -1, stat_numel = -5"},
        {"huge_bytes", "UPDATE transfers_rows SET bytes = 9223372036854775807"},
        {"huge_text",
         "UPDATE run SET status_reason = (SELECT group_concat(x, '') FROM "
         "(WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE "
         "n < 200000) SELECT 'reason-' AS x FROM r))"},
        {"empty_run_row", "DELETE FROM run"},
        {"empty_tables",
         "DELETE FROM actions_rows; DELETE FROM transfers_rows; DELETE FROM plan_rows;"
         "DELETE FROM ranks"},
        {"view_actions", "DROP VIEW actions; CREATE VIEW actions AS SELECT * FROM plan"},
        {"view_run",
         "CREATE TABLE r2 AS SELECT * FROM run; DROP TABLE run;"
         "CREATE VIEW run AS SELECT * FROM r2"},
        {"trigger_wipe",
         "CREATE TRIGGER wipe AFTER UPDATE ON run BEGIN DELETE FROM actions_rows;"
         " DELETE FROM transfers_rows; END"},
        {"trigger_raise",
         "CREATE TRIGGER stop BEFORE INSERT ON actions_rows BEGIN"
         " SELECT RAISE(ABORT, 'trigger says no'); END"},
        {"config_text_garbage", "UPDATE run SET config_text = 'iterations = = 2'"},
        {"config_text_html", "UPDATE run SET config_text = '<script>alert(1)</script>'"},
        {"run_id_newline", "UPDATE run SET run_id = 'a' || char(10) || 'b' || char(27) || '[2J'"},
        {"config_text_escape",
         "UPDATE run SET config_text = 'seed = 1' || char(10) || '# ' || char(27) || '[2J' || "
         "char(13) || char(7)"},
        {"module_name_sql",
         "UPDATE modules SET name = 'x''; DROP TABLE run; --' WHERE name = "
         "'vision'"},
        {"wal_mode_no_wal", "PRAGMA journal_mode=WAL"},
    };
    for (const auto& [name, statement] : mutations) {
      add("sql_" + name, [&](const fs::path& p) {
        fs::copy_file(run, p, fs::copy_options::overwrite_existing);
        sql(p, statement);
      });
    }
    // Payloads of another length than their tensor's (numel x dtype size): each read refuses
    // the file, where check and compare decoded other values, or none and judged the record
    // by its checksum alone (compare: IDENTICAL).
    const std::map<std::string, std::string> fullMutations = {
        {"payload_short", "UPDATE transfers SET payload = x'0102'"},
        {"payload_odd", "UPDATE transfers SET payload = substr(payload, 1, length(payload) - 1)"},
        {"payload_text", "UPDATE transfers SET payload = 'hello'"},
        {"payload_bytes", "UPDATE transfers SET bytes = bytes + 1"},
        {"payload_shape", "UPDATE transfers SET shape = '2,1,4'"},
        {"gradient_payload", "UPDATE gradients SET payload = x'01'"},
        {"reference_payload", "UPDATE reference_gradients SET payload = payload || payload"},
        {"inputs_payload", "UPDATE inputs SET payload = x'00'"},
    };
    for (const auto& [name, statement] : fullMutations) {
      add("full_" + name, [&](const fs::path& p) {
        fs::copy_file(f["full"], p, fs::copy_options::overwrite_existing);
        sql(p, statement);
      });
    }
    add("hot", [&](const fs::path& p) { hotJournal(run, p); });
    f["hot_journal"] = f["hot"] + "-journal";
    add("wal", [&](const fs::path& p) {  // WAL leftovers: committed frames, no checkpoint
      fs::copy_file(run, p, fs::copy_options::overwrite_existing);
      sql(p, "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;");
      const pid_t child = fork();
      if (child == 0) {
        sqlite3* db = nullptr;
        sqlite3_open(p.c_str(), &db);
        sqlite3_exec(db, "PRAGMA wal_autocheckpoint=0; UPDATE run SET status_reason = 'wal';",
                     nullptr, nullptr, nullptr);
        _exit(0);
      }
      int status = 0;
      waitpid(child, &status, 0);
    });
    f["wal_wal"] = f["wal"] + "-wal";
    add("foreign", [&](const fs::path& p) { sql(p, "CREATE TABLE recipes(name TEXT);"); });
    add("text", [&](const fs::path& p) { writeAll(p, "not a run file\n"); });
    add("empty", [&](const fs::path& p) { writeAll(p, ""); });
    add("header_only", [&](const fs::path& p) { writeAll(p, bytes.substr(0, 100)); });
    if (!fresh) std::ofstream(ready) << "ok\n";
    ::flock(lockFd, LOCK_UN);
    ::close(lockFd);
    return f;
  }();
  return built;
}

std::vector<HostileCase> allCases() {
  std::vector<HostileCase> all;
  for (const char* table : {"config.cases", "runfile.cases", "inputs.cases"}) {
    for (auto& c : loadCases(kTables + table)) all.push_back(std::move(c));
  }
  return all;
}

std::string testName(const ::testing::TestParamInfo<HostileCase>& info) {
  return testNameOf(info.param);
}

class HostileInput : public ::testing::TestWithParam<HostileCase> {};

TEST_P(HostileInput, OneClearLineAndNothingTouched) {
  const HostileCase& c = GetParam();
  const CaseResult r = runHostileCase(c, fixtures());
  const std::string detail = describeRuns(r);
  for (const auto& f : r.failures)
    ADD_FAILURE() << c.file << ":" << c.line << " " << c.cls << "/" << c.name << ": " << f
                  << detail;
}

INSTANTIATE_TEST_SUITE_P(Corpus, HostileInput,
                         ::testing::ValuesIn(runnable(allCases(), kHaveEngine)), testName);

// The classes and their sizes (printed for the record; the tables must keep their breadth).
TEST(HostileInputCorpus, CountsByClass) {
  std::map<std::string, int> count;
  for (const auto& c : allCases()) ++count[c.cls];
  for (const auto& [cls, n] : count) std::printf("%-14s %d cases\n", cls.c_str(), n);
  EXPECT_GE(count["config"], 50);
  EXPECT_GE(count["run-file"], 50);
  EXPECT_GE(count["run-file-schema"], 40);
  EXPECT_GE(count["config-syntax"], 25);
  EXPECT_GE(count["input-path"], 30);
}

}  // namespace
}  // namespace stagescope::testing
