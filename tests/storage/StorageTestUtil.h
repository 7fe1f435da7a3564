// Helpers shared by the storage tests: temporary directories and sample records with every
// field set to a distinct value.
#pragma once

#include <string>
#include <vector>

#include "core/events/Events.h"
#include "storage/RunFileError.h"

namespace stagescope::storage::test {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

events::RunInfo sampleRun(int worldSize, events::RecordLevel level);
events::RankInfo sampleRank(int rank);
events::ActionRecord sampleAction(int rank, int iteration, int seq);
// A message of `edge` from src to dst; `side` picks which rank records it.
events::TransferRecord sampleTransfer(events::Side side, int src, int dst, int iteration,
                                      int microbatch, const std::string& edge = "llm:pp0->pp1");
events::GradientRecord sampleGradient(int rank, int iteration);
events::LossRecord sampleLoss(int rank, int iteration, int microbatch);
events::InputRecord sampleInput(int rank, int iteration, int microbatch);
events::DiagnosisRecord sampleDiagnosis(int rank);

// Writes `n` executed actions of iteration 0 for `rank` (seq 0..n-1) into a new shard.
void writeActionsShard(const std::string& shardPath, int rank, int n);

// Rewrites a format-3 run file in the format-2 layout: each packed table becomes a plain table
// with the logical columns, `texts` goes, user_version 2.
void rewriteAsFormat2(const std::string& path);

void writeText(const std::string& path, const std::string& text);
// Runs `sql` (one or more statements) on the SQLite file at `path` (plants a defect).
void execSql(const std::string& path, const std::string& sql);
std::string readBytes(const std::string& path);

}  // namespace stagescope::storage::test
