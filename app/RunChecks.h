// Glue between `run`/`check` and the report library: load, check, print, write reports.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/analysis/Coverage.h"
#include "core/events/Events.h"
#include "storage/RunFileError.h"
#include "storage/RunReader.h"

namespace stagescope::app {

inline constexpr int kExitConfig = 2;  // bad config or command line (also plan deadlock)
// `run`: a rank received a payload whose checksum differs from the one its sender put in the
// frame (in-band verification); the run is marked failed.  Below run_status (10): the cause.
inline constexpr int kExitCorruptTransfer = 9;

struct CheckFiles {
  std::string junit, json;
  bool bitwise = true;
  double tolerance = -1;     // --tol: replaces the tolerance rule (reference gradients, --against)
  std::string plan;          // --plan: a config whose plan a captured job is judged against
  std::FILE* text = stdout;  // the findings as text: stderr when a report has stdout
};

// Checks a run file (optionally against another); prints the text report; returns the
// check's exit code (docs/exit-codes.md).
int checkRunFile(const std::string& path, const std::string& against, const CheckFiles& files);
int exitCodeFor(events::RunStatus status);
// The wait-for graph of a hung run (analysis::waitForGraph: the ranks' structured timeout
// records and the plan, never their sentences), as terminal text and "hang" diagnoses.
struct HangAnalysis {
  std::string text;         // "wait-for graph:" then one sentence per rank, then the verdict
  std::string verdict;      // every verdict sentence, root cause first (analysis::WaitGraph)
  std::string headline;     // the root cause for a first line (WaitGraph::headline)
  size_t verdictCount = 0;  // how many verdicts the graph holds
  std::string remedy;       // "to change: ..." (WaitGraph::remedy), also recorded as a diagnosis
  std::vector<events::DiagnosisRecord> records;  // kind "hang": one per rank + the verdict
  int erroredRank = -1;  // a rank that recorded an error: the cause, the timeouts follow
  std::string error;
  // Per waiting rank, what it waited on (analysis::WaitEdge::sentence): "rank 2 waits for the
  // activation of microbatch 1 from rank 1 (edge E, iteration 0, action 3 RF)".
  std::map<int, std::string> waitSentence;
};
HangAnalysis analyzeHang(const std::string& runPath);
// Removes the merged companion shards (RUN.rank<i>.shard) of a completed run (`run` and `merge`
// leave it one file); returns how many.  A failure to remove is said on stderr (the shards are
// then kept), never thrown.
size_t removeShardsOfCompletedRun(const std::string& run);
// Records `hang.records` in the run file through "<run>.launcher.shard" (written, then merged);
// problems go to stderr as one line (the graph was already printed).
void recordHangDiagnoses(const std::string& runPath, HangAnalysis& hang);

}  // namespace stagescope::app
