// A captured rank (the `stagescope` c10d backend, core/capture) creates its shard and never
// replaces a file it did not create: a file at the shard's path stops the rank with one line
// naming it, and the file stays byte for byte as it was (README "Output files").
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/capture/CaptureSession.h"

namespace stagescope::capture {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(CaptureShard, AnExistingFileIsRefusedNotReplaced) {
  const fs::path dir =
      fs::temp_directory_path() / ("stagescope-capture-shard-" + std::to_string(::getpid()));
  fs::remove_all(dir);  // this test's own directory (named by our pid)
  fs::create_directories(dir);
  const fs::path run = dir / "job.db", shard = dir / "job.db.rank1.shard";
  const std::string mine = "notes that are not a shard\n";
  std::ofstream(shard, std::ios::binary) << mine;

  CaptureSession& session = CaptureSession::instance();
  CaptureConfig cfg;
  cfg.runPath = run.string();
  cfg.runId = "job";
  session.configure(cfg);
  try {
    session.start(1, 2);
    ADD_FAILURE() << "rank 1 started over an existing " << shard;
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 1: " + shard.string() + ": already exists"), std::string::npos)
        << what;
    EXPECT_NE(what.find("never replaces a file it did not create"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_EQ(slurp(shard), mine);
  EXPECT_FALSE(session.started());

  // A fresh path is created as before.
  cfg.runPath = (dir / "fresh.db").string();
  session.configure(cfg);
  session.start(1, 2);
  EXPECT_TRUE(session.started());
  EXPECT_TRUE(fs::exists(dir / "fresh.db.rank1.shard"));
  session.finish(events::RunStatus::Completed, "");
  fs::remove_all(dir);
}

// Rank 0 creates the run file, but only after its own shard is open: a refused shard leaves
// no empty run file stuck in `running` behind it.
TEST(CaptureShard, RankZeroRefusedLeavesNoRunFile) {
  const fs::path dir =
      fs::temp_directory_path() / ("stagescope-capture-shard0-" + std::to_string(::getpid()));
  fs::remove_all(dir);  // this test's own directory (named by our pid)
  fs::create_directories(dir);
  const fs::path run = dir / "job.db", shard = dir / "job.db.rank0.shard";
  const std::string mine = "an earlier job's notes\n";
  std::ofstream(shard, std::ios::binary) << mine;

  CaptureSession& session = CaptureSession::instance();
  CaptureConfig cfg;
  cfg.runPath = run.string();
  cfg.runId = "job";
  session.configure(cfg);
  EXPECT_THROW(session.start(0, 2), std::runtime_error);
  EXPECT_FALSE(session.started());
  EXPECT_EQ(slurp(shard), mine);
  EXPECT_FALSE(fs::exists(run)) << "a refused rank 0 left " << run << " behind";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stagescope::capture
