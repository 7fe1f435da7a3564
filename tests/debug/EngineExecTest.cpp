// `stagescope` (the front, no LibTorch) and `stagescope-engine` (run, worker): the front finds
// the engine next to the file it runs from, and says in one line which file is missing when it
// is not there (app/EngineExec.h).  That the front links no LibTorch is DependencyRule.* in
// tests/CMakeLists.txt; that `run` through the front behaves as before is the rest of the suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/debug/DebugUtil.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

namespace fs = std::filesystem;

#ifdef STAGESCOPE_HAVE_ENGINE
constexpr bool kHaveEngine = true;
#else
constexpr bool kHaveEngine = false;
#endif

// A fresh directory holding a copy of this build's `stagescope` and nothing else.
fs::path lonelyFront(const std::string& tag) {
  const fs::path dir = fs::path(tempRunPath(tag)).replace_extension("");
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(stagescopeExe(), dir / "stagescope");
  return dir;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

TEST(EngineExec, FrontWithoutTheEngineNamesTheMissingFileInOneLine) {
  const fs::path dir = lonelyFront("engine-missing");
  const std::string front = (dir / "stagescope").string();
  const std::string engine = (dir / "stagescope-engine").string();
  const std::string out = (dir / "run.db").string();
  const std::string what = kHaveEngine
                               ? ", which is missing; expected the stagescope-engine executable "
                                 "built with this stagescope next to it (cmake --build BUILD "
                                 "--target stagescope-engine)"
                               : ", which this build leaves out (STAGESCOPE_WITH_TORCH=OFF); use "
                                 "a build with LibTorch";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", debugConfig("tiny"), "-o", out, "-q"},
        std::vector<std::string>{"worker", debugConfig("tiny"), "--out", out}}) {
    const CliResult r = runCliWith(front, args, 60);
    EXPECT_EQ(r.exitCode, 2) << r.output;
    EXPECT_EQ(r.output,
              "error: `stagescope " + args[0] + "` needs the engine, " + engine + what + "\n");
  }
  EXPECT_EQ(entries(dir), std::vector<std::string>{"stagescope"}) << "nothing was written";
  fs::remove_all(dir);
}

// A file at the engine's path that cannot be executed is named with the reason, and left alone.
TEST(EngineExec, AnEngineThatCannotBeStartedIsNamedWithTheReason) {
  const fs::path dir = lonelyFront("engine-not-executable");
  const fs::path engine = dir / "stagescope-engine";
  { std::ofstream(engine) << "not a program\n"; }
  fs::permissions(engine, fs::perms::owner_read | fs::perms::owner_write);
  const CliResult r =
      runCliWith((dir / "stagescope").string(), {"run", debugConfig("tiny"), "-q"}, 60);
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_EQ(r.output, "error: `stagescope run` needs the engine, " + engine.string() +
                          ", which cannot be started: Permission denied; expected an executable "
                          "file\n");
  if (kHaveEngine) {
    const CliResult v = runCliWith((dir / "stagescope").string(), {"--version"}, 60);
    EXPECT_NE(v.output.find(engine.string() + ", which is not executable: run and worker "
                                              "unavailable"),
              std::string::npos)
        << v.output;
  }
  std::ifstream in(engine);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "not a program\n");
  fs::remove_all(dir);
}

// Help and usage errors of run/worker come from the front, engine or not.
TEST(EngineExec, FrontWithoutTheEngineStillHelpsAndRefusesBadArguments) {
  const fs::path dir = lonelyFront("engine-missing-help");
  const std::string front = (dir / "stagescope").string();
  const CliResult help = runCliWith(front, {"run", "--help"}, 60);
  EXPECT_EQ(help.exitCode, 0) << help.output;
  for (const char* option : {"--set", "--fault", "--out", "--record", "--reference", "--check",
                             "--repeat", "--force", "--quiet"}) {
    EXPECT_NE(help.output.find(option), std::string::npos) << option << " in\n" << help.output;
  }
  const CliResult bad = runCliWith(front, {"run", debugConfig("tiny"), "--repeat", "0"}, 60);
  EXPECT_EQ(bad.exitCode, 2) << bad.output;
  EXPECT_EQ(lines(bad.output).size(), 2u) << bad.output;
  EXPECT_EQ(bad.output.find("needs the engine"), std::string::npos) << bad.output;
  fs::remove_all(dir);
}

TEST(EngineExec, VersionSaysWhereTheEnginesLibTorchIs) {
  const fs::path dir = lonelyFront("engine-missing-version");
  const CliResult lonely = runCliWith((dir / "stagescope").string(), {"--version"}, 60);
  EXPECT_EQ(lonely.exitCode, 0) << lonely.output;
  const std::string expected =
      kHaveEngine ? "LibTorch 2." : "LibTorch: none (built without the engine; run and worker";
  EXPECT_NE(lonely.output.find(expected), std::string::npos) << lonely.output;
  if (kHaveEngine) {
    EXPECT_NE(lonely.output.find(" expected in " + (dir / "stagescope-engine").string() +
                                 ", which is missing: run and worker unavailable"),
              std::string::npos)
        << lonely.output;
    const CliResult built = runCli({"--version"}, 60);
    EXPECT_NE(built.output.find("(in stagescope-engine, for run and worker)"), std::string::npos)
        << built.output;
  }
  fs::remove_all(dir);
}

// `plan`'s output without its "memory available now" line: MemAvailable moves between two
// runs of `plan` (another test's ranks start and end meanwhile), the rest of the output does not.
std::string withoutMemoryAvailable(const std::string& out) {
  std::string kept;
  size_t at = 0;
  while (at < out.size()) {
    size_t end = out.find('\n', at);
    end = end == std::string::npos ? out.size() : end + 1;
    const std::string line = out.substr(at, end - at);
    if (line.rfind("memory available now:", 0) != 0) kept += line;
    at = end;
  }
  return kept;
}

// The front alone does every other command: `plan` from the copy prints what the build's does.
TEST(EngineExec, FrontWithoutTheEngineRunsTheOtherCommands) {
  const fs::path dir = lonelyFront("engine-missing-plan");
  const CliResult lonely = runCliWith((dir / "stagescope").string(), {"plan", debugConfig("tiny")});
  const CliResult built = runCli({"plan", debugConfig("tiny")});
  EXPECT_EQ(lonely.exitCode, 0) << lonely.output;
  EXPECT_NE(lonely.output.find("plan check: ok"), std::string::npos) << lonely.output;
  EXPECT_EQ(withoutMemoryAvailable(lonely.output), withoutMemoryAvailable(built.output));
  fs::remove_all(dir);
}

// Through a symbolic link in another directory (an install that links `stagescope` into a bin
// directory), the engine is still found next to the real file: the engine itself reads the
// config and refuses it, which the front never does.
TEST(EngineExec, EngineIsFoundNextToTheLinkedFile) {
  if (!kHaveEngine) GTEST_SKIP() << "this build has no engine";
  const fs::path dir = fs::path(tempRunPath("engine-link")).replace_extension("");
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_symlink(fs::absolute(stagescopeExe()), dir / "stagescope");
  const std::string missing = (dir / "no-such-config.toml").string();
  const CliResult r = runCliWith((dir / "stagescope").string(), {"run", missing, "-q"}, 120);
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_EQ(r.output, "error: " + missing +
                          ": cannot open the config file (missing or not a regular file)\n");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stagescope::testing
