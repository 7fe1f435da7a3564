// `stagescope compare`: two runs aligned by logical identity (Align.h), never by rank number, so
// runs with different TP/PP/DP layouts of the same model, seed and global batch can be compared.
//
// Verdict (in this order; every verdict names the evidence it used):
//   INCOMPLETE  either run is not `completed`, covers less than its plan (Coverage.h), or holds
//               aligned records the other lacks (a record filter, a killed rank), or nothing
//               could be compared: never IDENTICAL/EQUAL; the reason lists what is missing
//   DIVERGED    an aligned item differs beyond the tolerance rule (Tolerance.h), or the runs do
//               not train on the same global batch, or the copies of one tensor or loss within
//               a run disagree (Replicas.h); the causally first divergence is named
//   EQUAL WITHIN TOLERANCE  every compared item is identical or within the rule
//   IDENTICAL   every compared item is bitwise identical (values or checksums)
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/Align.h"
#include "core/analysis/Analysis.h"
#include "core/analysis/Coverage.h"
#include "core/analysis/ScheduleOrder.h"
#include "core/events/Events.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct CompareOptions {
  std::string labelA = "A", labelB = "B";
  double tolerance = -1;          // --tol: one relative L2 bound for everything; < 0: the rule
  RecordFilter filterA, filterB;  // the runs' record filters (recordFilterOf)
  // The runs' coverage, when the caller took it already (coverageOf(run, filterA / filterB)):
  // the plan is read for nothing else, so a caller may free the runs' plans before comparing
  // (`compare` of two message-heavy 10^7-event runs: ~0.6 GB).  Unset: taken here.
  std::optional<RunCoverage> coverageA, coverageB;
  size_t topGradients = 20;   // params that differ most, kept in the report
  size_t maxLossRows = 2000;  // loss rows kept (the verdict uses all)
};

enum class Verdict { Identical, WithinTolerance, Diverged, Incomplete };
const char* toString(Verdict v);

struct ConfigDiffLine {
  char op = ' ';  // ' ' same, '-' only in A, '+' only in B
  std::string text;
};

struct LossRow {
  int iteration = -1, microbatch = -1, dp = -1;  // dp -1: mean over replicas
  bool hasA = false, hasB = false;
  double a = NAN, b = NAN, diff = NAN, relDiff = NAN;  // diff = b - a
};

struct GradRow {
  std::string param;
  int iteration = -1;
  bool hasA = false, hasB = false;
  double normA = NAN, normB = NAN, relDiff = NAN;
  bool bitwiseEqual = false;  // values or same-layout shard checksums equal
  std::string how;            // the evidence: "values", "checksums", "norms (fallback)"
  double tolerance = NAN;     // the bound applied
  std::string state;          // identical / within tolerance / differ / only in A / ...
};

struct TransferSideInfo {
  bool present = false;
  int64_t index = -1;  // position in that run's transfers
  int srcRank = -1, dstRank = -1;
  std::vector<uint64_t> checksums;  // distinct sender checksums (TP copies)
  std::vector<int64_t> shape;
  std::string dtype;
  bool hasStats = false;
  events::TensorStats stats;
};

struct TransferDiff {
  std::string edge;
  events::Direction direction = events::Direction::Activation;
  int iteration = -1, microbatch = -1, srcDp = -1;
  TransferSideInfo a, b;
  std::string reason;    // "checksum", "shape", "only in A", ...
  double relDiff = NAN;  // ||b-a|| / ||a|| when both payloads were available
  double maxAbsDiff = NAN;
};

struct RunSummary {
  std::string label, path, runId, status, statusReason, configHash, level;
  // What the reports call the run: its run id, except for a captured job, whose id is often
  // torchrun's generated one (a UUID): the name of its run file, which its user chose.
  std::string name;
  int worldSize = 0, iterations = 0, microbatches = 0;
  std::string layout;  // "llm tp2 pp2 dp1; vision tp1 pp1 dp2"
  size_t events = 0;
  TimeBreakdown time;
};

struct Comparison {
  RunSummary a, b;
  bool configEqual = true;
  std::vector<ConfigDiffLine> configDiff;  // full line diff (LCS)
  Verdict verdict = Verdict::Identical;
  std::string verdictReason;  // one sentence
  // Why the runs are not comparable at all (Comparability.h: another model, vocabulary, sample
  // shape or seed), or "": then the verdict is INCOMPLETE and no first divergence is named.
  std::string refused;
  std::string evidence;       // which evidence judged how many items ("values: 216, ...")
  std::string toleranceRule;  // ToleranceRule::describe()
  RunCoverage coverageA, coverageB;
  std::vector<std::string> missing;  // INCOMPLETE: what is missing, one line each
  // Copies of one tensor or loss within a run that differ (Replicas.h), one sentence each:
  // aligned items are judged on one copy, so these make the verdict DIVERGED.
  std::vector<std::string> replicasA, replicasB;
  Alignment alignment;  // every aligned item, in causal order
  // The causally first divergence (any kind: message, loss, gradient), as every consumer names
  // it; also what the viewer shows.
  std::optional<AlignedItem> first;
  std::string firstText;  // one sentence naming it (same text in text, Markdown, JSON, HTML)

  // Losses.
  std::vector<LossRow> losses;  // sorted by (iteration, microbatch, dp); capped
  // Differing: beyond the tolerance rule (the verdict's sense); within tolerance: not bitwise
  // equal but within the rule.
  size_t lossesCompared = 0, lossesDiffering = 0, lossesWithinTolerance = 0, lossesOnlyOne = 0;
  double maxLossRelDiff = 0;
  std::vector<double> iterLossA, iterLossB;  // mean loss per iteration (NaN where missing)
  // Losses averaged into iterLossA/B[i]: 0 means none recorded (missing), so a reader can tell a
  // missing iteration from a NaN mean.
  std::vector<int> iterLossCountA, iterLossCountB;

  // Gradients.
  std::vector<GradRow> gradTop;                // the params that differ most (largest relDiff)
  std::vector<GradRow> gradLast;               // every param at the last common iteration
  std::vector<double> totalNormA, totalNormB;  // per iteration
  size_t gradsCompared = 0, gradsDiffering = 0, gradsWithinTolerance = 0, gradsOnlyOne = 0;
  double maxGradRelDiff = 0;
  // A module's gradients in one iteration all A = r x B with one r (GradientRatio.h), one
  // sentence each, naming §7.1 where r is the layouts' data-parallel factor.
  std::vector<std::string> gradientRatios;

  // Transfers.
  bool transfersComparable = true;  // both runs carry checksums (level >= stats)
  size_t transfersCompared = 0, transfersDiffering = 0, transfersWithinTolerance = 0,
         transfersOnlyA = 0, transfersOnlyB = 0;
  std::optional<TransferDiff> firstDivergent;  // the first divergent message, causal order
  // The order each rank ran its actions in (not part of the verdict: two schedules of one
  // model may order differently and still be equal).
  ScheduleDifference schedule;
  // A captured job against the other run's plan (the plan its engine executed), when exactly
  // one run is a capture and the other holds a plan (PlanConformance.h): one sentence; "" else.
  std::string captureAgainstPlan;
};

Comparison compareRuns(const model::RunModel& a, const model::RunModel& b,
                       const CompareOptions& opts = {});

// The exit code of `compare` for a verdict: 0 identical / within tolerance, 18 diverged,
// 19 incomplete (docs/exit-codes.md).
int exitCodeOf(Verdict v);

// One sentence naming an aligned item and its judgement ("message vision->llm activation it1
// gmb2: differ by values, relative L2 0.41 > 0.001 (A .., B ..)").  CLI, reports and the viewer
// name the first divergence with it.
std::string describeItem(const AlignedItem& item);

// Line diff of two texts (longest common subsequence; falls back to a prefix/suffix diff
// for very long inputs).
std::vector<ConfigDiffLine> diffLines(const std::string& a, const std::string& b);

}  // namespace stagescope::analysis
