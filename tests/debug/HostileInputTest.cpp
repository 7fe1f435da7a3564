// Hostile input at the command line: invalid configs for `run` and `plan` (exit 2, one clear
// line), and run files that are truncated, foreign, plain text, empty, missing or from a
// newer version for `check`, `compare` and `export` (exit 1, one clear line, no crash).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/debug/DebugUtil.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

namespace fs = std::filesystem;

std::string invalidDir() {
  return std::string(STAGESCOPE_SOURCE_DIR) + "/tests/plan/invalid_configs";
}

// "# expect: FRAGMENT" on the first line of each invalid config.
std::string expectedFragment(const fs::path& file) {
  std::ifstream in(file);
  std::string first;
  std::getline(in, first);
  const std::string tag = "# expect: ";
  return first.rfind(tag, 0) == 0 ? first.substr(tag.size()) : "";
}

// A sample of the corpus: every third file, in name order (21 of 62).
std::vector<fs::path> sampleConfigs() {
  std::vector<fs::path> all;
  for (const auto& e : fs::directory_iterator(invalidDir())) all.push_back(e.path());
  std::sort(all.begin(), all.end());
  std::vector<fs::path> sample;
  for (size_t i = 0; i < all.size(); i += 3) sample.push_back(all[i]);
  return sample;
}

void expectOneClearLine(const CliResult& r, int code, const std::string& what,
                        const std::string& fragment) {
  EXPECT_EQ(r.exitCode, code) << what << "\n" << r.output;
  const auto ls = lines(r.output);
  ASSERT_EQ(ls.size(), 1u) << what << "\n" << r.output;
  EXPECT_EQ(ls[0].rfind("error: ", 0), 0u) << what << "\n" << r.output;
  EXPECT_NE(ls[0].find(fragment), std::string::npos)
      << what << ": expected '" << fragment << "' in\n"
      << r.output;
}

TEST(HostileConfig, RunAndPlanRejectWithOneLine) {
  const auto sample = sampleConfigs();
  ASSERT_GE(sample.size(), 20u);
  for (const auto& file : sample) {
    const std::string expect = expectedFragment(file);
    ASSERT_FALSE(expect.empty()) << file;
    const std::string out = tempRunPath("hostile-" + file.stem().string());
    expectOneClearLine(runCli({"run", file.string(), "-o", out}), 2,
                       "run " + file.filename().string(), expect);
    expectOneClearLine(runCli({"plan", file.string()}), 2, "plan " + file.filename().string(),
                       expect);
    EXPECT_FALSE(fs::exists(out)) << "a rejected config must not create a run file";
  }
  expectOneClearLine(runCli({"plan", invalidDir() + "/no_such_file.toml"}), 2, "missing config",
                     "cannot open the config file");
}

class HostileRunFile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    RunOutput good = runStagescope(debugConfig("pipe3"), {}, "hostile-good", 120);
    ASSERT_EQ(good.exitCode, 0) << good.output;
    good_ = good.runPath;
    const fs::path dir = fs::path(good_).parent_path();
    // truncated: the first third of a real run file
    truncated_ = (dir / "truncated.db").string();
    {
      std::ifstream in(good_, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::ofstream(truncated_, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
    }
    // foreign: a valid SQLite database that is not a stagescope run
    foreign_ = (dir / "foreign.db").string();
    fs::remove(foreign_);
    sqlite3* db = nullptr;
    sqlite3_open(foreign_.c_str(), &db);
    sqlite3_exec(
        db,
        "CREATE TABLE recipes(name TEXT, flour REAL); INSERT INTO recipes VALUES('bread', 500);",
        nullptr, nullptr, nullptr);
    sqlite3_close(db);
    // text: a plain text file
    text_ = (dir / "notes.db").string();
    std::ofstream(text_) << "this is not a run file\n";
    // empty
    empty_ = (dir / "empty.db").string();
    std::ofstream(empty_).close();
    // newer: a real run file that claims a future schema version
    newer_ = (dir / "newer.db").string();
    fs::copy_file(good_, newer_, fs::copy_options::overwrite_existing);
    sqlite3_open(newer_.c_str(), &db);
    sqlite3_exec(db, "PRAGMA user_version = 9999;", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    missing_ = (dir / "does-not-exist.db").string();
  }
  static inline std::string good_, truncated_, foreign_, text_, empty_, newer_, missing_;
};

TEST_F(HostileRunFile, CheckCompareExportFailWithOneLine) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {truncated_, "truncated"}, {foreign_, "foreign"}, {text_, "text"},
      {empty_, "empty"},         {newer_, "newer"},     {missing_, "missing"}};
  for (const auto& [file, what] : files) {
    // The message names the file.
    const std::string name = fs::path(file).filename().string();
    expectOneClearLine(runCli({"check", file}), 1, "check " + what, name);
    expectOneClearLine(runCli({"compare", good_, file}), 1, "compare good " + what, name);
    expectOneClearLine(runCli({"compare", file, good_}), 1, "compare " + what + " good", name);
    expectOneClearLine(runCli({"export", file, "--chrome-trace", file + ".json"}), 1,
                       "export " + what, name);
  }
  // The newer file says so.
  CliResult newer = runCli({"check", newer_});
  EXPECT_NE(newer.output.find("9999"), std::string::npos) << newer.output;
  // The good file still checks clean (the fixtures did not touch it).
  EXPECT_EQ(runCli({"check", good_}).exitCode, 0);
}

}  // namespace
}  // namespace stagescope::testing
