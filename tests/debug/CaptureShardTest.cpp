// A captured rank (the `stagescope` c10d backend, app/capture) creates its shard and never
// replaces a file it did not create: a file at the shard's path stops the rank with one line
// naming it, and the file stays byte for byte as it was (docs/commands.md "Output files";
// docs/capture.md "Python API").
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "app/capture/CaptureSession.h"

namespace stagescope::capture {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A fresh directory of this test's own (named by our pid) holding `job.db`'s shard path for
// `rank` with someone else's text in it; the session is configured to record into job.db.
struct ExistingShard {
  fs::path dir, run, shard;
  std::string text;
  ExistingShard(const std::string& tag, int rank, std::string contents)
      : dir(fs::temp_directory_path() / ("stagescope-" + tag + "-" + std::to_string(::getpid()))),
        run(dir / "job.db"),
        shard(dir / ("job.db.rank" + std::to_string(rank) + ".shard")),
        text(std::move(contents)) {
    fs::remove_all(dir);  // this test's own directory
    fs::create_directories(dir);
    std::ofstream(shard, std::ios::binary) << text;
    CaptureConfig cfg;
    cfg.runPath = run.string();
    cfg.runId = "job";
    CaptureSession::instance().configure(cfg);
  }
  ~ExistingShard() { fs::remove_all(dir); }
};

TEST(CaptureShard, AnExistingFileIsRefusedNotReplaced) {
  ExistingShard f("capture-shard", 1, "notes that are not a shard\n");
  const fs::path& dir = f.dir;
  const fs::path& shard = f.shard;
  const std::string& mine = f.text;

  CaptureSession& session = CaptureSession::instance();
  CaptureConfig cfg;
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
  cfg.runId = "job";
  session.configure(cfg);
  session.start(1, 2);
  EXPECT_TRUE(session.started());
  EXPECT_TRUE(fs::exists(dir / "fresh.db.rank1.shard"));
  session.finish(events::RunStatus::Completed, "");
}

// Rank 0 creates the run file, but only after its own shard is open: a refused shard leaves
// no empty run file stuck in `running` behind it.
TEST(CaptureShard, RankZeroRefusedLeavesNoRunFile) {
  ExistingShard f("capture-shard0", 0, "an earlier job's notes\n");
  CaptureSession& session = CaptureSession::instance();
  EXPECT_THROW(session.start(0, 2), std::runtime_error);
  EXPECT_FALSE(session.started());
  EXPECT_EQ(slurp(f.shard), f.text);
  EXPECT_FALSE(fs::exists(f.run)) << "a refused rank 0 left " << f.run << " behind";
}

}  // namespace
}  // namespace stagescope::capture
