// `stagescope check`: the CI gate over one recorded run (the verdicts; app/report writes them).
//
// Every check class has its own exit code.  When several classes fail, the process exits
// with the code of the MOST SEVERE one, which is the LOWEST non-zero code below (the order
// puts causes before their usual consequences: a hang leaves unmatched messages, an unmatched
// message shifts the schedule and the counts, a corrupted message produces NaNs and wrong
// gradients).  The same table is in docs/exit-codes.md.
//
//   code  check (finding name)   fails when
//   ----  ---------------------  ---------------------------------------------------------
//     0   -                      every check passed (or was skipped)
//     1   (CLI) error            the run file could not be read / internal error
//     2   (CLI) usage            bad command line
//    10   run_status             status is running/failed/hung/killed, or the file is partial
//                                (message carries the status reason and the diagnoses), or a
//                                completed run lost a record: a DP copy of a reduced gradient
//                                its layout implies is missing (Coverage.h CopyCoverage), or
//                                (level full) an input row of a first-stage rank (Inputs.h)
//    11   unmatched_transfer     a send without its receive, or a receive without its send
//    12   plan_order             executed action order differs from the plan (first
//                                deviation per rank); a captured job: its messages differ
//                                from the plan of its declared layout or --plan, or its own
//                                schedule (warmup, global stage) differs from the plan's
//    13   message_count          messages per (rank, iteration, direction, side) differ from
//                                what the plan implies
//    14   shape_mismatch         send and recv of one message disagree on shape or dtype
//    15   checksum_mismatch      send and recv of one message disagree on the checksum
//    16   nonfinite              a NaN/Inf in a transfer, gradient or loss (the FIRST one in
//                                causal order is named); a handled overflow's gradients
//                                (LossScale.h) are reported as an event, not counted
//    17   reference_gradient     gathered gradients differ from the single-process reference;
//                                also the run's own consistency: an optimizer step
//                                (OptimizerStep.h), a reduced gradient against what its DP
//                                replicas accumulated (Accumulation.h), an input row against
//                                the samples the layout assigns its replica (Inputs.h); a
//                                captured job's reduction against its loss normalisation
//                                (GradientAudit.h) and its modules' loss scales (LossScale.h)
//    18   against                run-to-run difference against another run (--against)
//    20   nccl_replay            the run's communication replayed under NCCL's rules would not
//                                complete: a hang predicted for GPUs (NcclReplay.h), with the
//                                wait-for cycle, the rule blocking each rank and what to move
#pragma once

#include <string>
#include <vector>

#include "core/analysis/Coverage.h"
#include "core/model/LiveState.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

namespace exit_code {
inline constexpr int kOk = 0;
inline constexpr int kError = 1;
inline constexpr int kUsage = 2;
inline constexpr int kRunStatus = 10;
inline constexpr int kUnmatchedTransfer = 11;
inline constexpr int kPlanOrder = 12;
inline constexpr int kMessageCount = 13;
inline constexpr int kShapeMismatch = 14;
inline constexpr int kChecksumMismatch = 15;
inline constexpr int kNonFinite = 16;
inline constexpr int kReferenceGradient = 17;
inline constexpr int kAgainst = 18;
inline constexpr int kIncomplete = 19;  // compare: a run is incomplete (Compare.h)
inline constexpr int kNcclReplay = 20;
}  // namespace exit_code

// One failure.  Fields that do not apply are -1 / "".
struct Finding {
  std::string name;  // the check class, e.g. "checksum_mismatch"
  int exitCode = 0;
  std::string message;  // one or two human sentences naming what, where and the values
  int rank = -1, iteration = -1, microbatch = -1;
  std::string edge;
  std::string direction;  // "activation" / "gradient" for transfer findings
  int peerRank = -1;      // the other rank of a message
  int actionSeq = -1;
  std::string action;  // action kind ("SF", "B", ...)
  std::string tensor;  // "transfer llm:pp0->pp1 activation" or a parameter name
};

enum class CheckStatus { Passed, Failed, Skipped };
const char* toString(CheckStatus s);

// The outcome of one check class.
struct CheckResult {
  std::string name;
  int exitCode = 0;  // the class's code (also when it passed)
  CheckStatus status = CheckStatus::Passed;
  std::string summary;            // one line: what was checked, or why it was skipped
  std::vector<Finding> findings;  // every failure, up to CheckOptions::maxFindings
  int64_t total = 0;              // number of failures found: always complete
  double seconds = 0;
};

struct CheckOptions {
  // Reference gradient check and --against --tolerant: the tolerance rule of Tolerance.h for the
  // run's dtype (relative L2 per parameter with the model-norm floor); tolerance >= 0 (--tol)
  // replaces it.  Values when payloads are loaded (level full), else norms (labelled fallback).
  double tolerance = -1;
  // What the run's [record] filter excluded: checks judge only what was recorded and say what
  // they skipped.
  RecordFilter filter;
  // Run-to-run check (--against): nullptr = skip.
  const model::RunModel* against = nullptr;
  RecordFilter againstFilter;
  bool againstBitwise = true;  // true: IDENTICAL required; false: EQUAL WITHIN TOLERANCE enough
  // Per class, kept in the report (text shows the first few, JSON and JUnit all of them). Only a
  // guard against a file with millions of failures (~200 bytes each); `total` counts past it.
  size_t maxFindings = 1000000;
  // A captured job (no plan in its file) is judged by plan_order against the plan of this
  // stagescope config (`check --plan CONFIG`; the source names it), else against the layout
  // the job declared (PlanConformance.h), else plan_order is skipped.
  std::string planConfigText, planConfigSource;
  // Classes to run; empty = all.  Names as in the table above.
  std::vector<std::string> only;
  // Live ("live, N of M ranks still writing", and who writes) when the run was being written
  // as it was read (storage/RunLiveness.h): a snapshot, never a finished run: run_status fails
  // and says so.
  model::LiveState live;
  // The command that recovers a run whose records are not all in its file (it ended without a
  // merge: status running and shards beside it, or a partial merge), e.g. "stagescope merge
  // runs/x.db"; "" when nothing is to recover.  run_status leads with it, and the messages whose
  // other side is in an unmerged shard are counted, not listed: they are its consequences.
  std::string recover;
};

struct CheckReport {
  std::string runPath, runId;
  std::string status;               // run status as recorded
  model::LiveState live;            // CheckOptions::live: no verdict on a run being written
  std::vector<CheckResult> checks;  // in table order
  int exitCode = 0;                 // 0, or the code of the most severe failing class
  double seconds = 0;
  bool passed() const { return exitCode == 0; }
  const CheckResult* find(const std::string& name) const;
};

CheckReport checkRun(const model::RunModel& run, const CheckOptions& opts = {});

}  // namespace stagescope::analysis
