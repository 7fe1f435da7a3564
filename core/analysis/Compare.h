// `stagescope compare`: two runs aligned by LOGICAL identity, never by rank number, so runs
// with different TP/PP/DP layouts of the same model and seed can be compared.
//
// Alignment keys:
//   losses     (iteration, microbatch, dp replica); the replica's sample range is
//              [(dp*m + mb) / (m*D), (dp*m + mb + 1) / (m*D)) of the global batch (dp-major);
//              when D differs between the runs, the per-(iteration, microbatch) mean over
//              replicas is compared instead.  Duplicate records (TP ranks) are counted once.
//   gradients  (iteration, full parameter name) of GradPhase::Reduced records, shards gathered
//              by (partitionDim, partitionOffset); norm = sqrt(sum of shard norm^2), replicas
//              counted once.
//   transfers  (edge, direction, iteration, microbatch, source dp replica), sender-side
//              checksums (the set of distinct checksums over TP copies), visited in schedule
//              order (see Analysis.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/Analysis.h"
#include "core/events/Events.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct CompareOptions {
  std::string labelA = "A", labelB = "B";
  double relTol = 1e-6;      // "equal within tolerance" on losses
  double gradRelTol = 1e-5;  // ... and on gradients (the engine's float32 criterion)
  // Gradient differences are relative to max(norm, floor), floor = max(gradNormFloor,
  // gradNormFloorRel x the whole model's gradient norm of that iteration): a gradient that is
  // zero analytically (e.g. an attention key bias) holds only rounding noise in both runs.
  double gradNormFloor = 1e-12;
  double gradNormFloorRel = 1e-3;
  size_t topGradients = 20;   // params that differ most, kept in the report
  size_t maxLossRows = 2000;  // loss rows kept (the verdict uses all)
  // Optional payload fetcher for the first divergent transfer when payloads were not loaded
  // (wire to storage::loadTransferPayload(path, run.transferIds[index])).  which: 0 = A, 1 = B.
  std::function<std::vector<uint8_t>(int which, int64_t transferIndex)> payload;
};

enum class Verdict { Identical, WithinTolerance, Diverged };
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
  std::string how;            // "values", "checksums", "norms"
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

  // Losses.
  std::vector<LossRow> losses;  // sorted by (iteration, microbatch, dp); capped
  size_t lossesCompared = 0, lossesDiffering = 0, lossesOnlyOne = 0;
  double maxLossRelDiff = 0;
  std::vector<double> iterLossA, iterLossB;  // mean loss per iteration (NaN where missing)

  // Gradients.
  std::vector<GradRow> gradTop;                // the params that differ most (largest relDiff)
  std::vector<GradRow> gradLast;               // every param at the last common iteration
  std::vector<double> totalNormA, totalNormB;  // per iteration
  size_t gradsCompared = 0, gradsDiffering = 0, gradsOnlyOne = 0;
  double maxGradRelDiff = 0;

  // Transfers.
  bool transfersComparable = true;  // both runs carry checksums (level >= stats)
  size_t transfersCompared = 0, transfersDiffering = 0, transfersOnlyA = 0, transfersOnlyB = 0;
  std::optional<TransferDiff> firstDivergent;  // in schedule order
};

Comparison compareRuns(const model::RunModel& a, const model::RunModel& b,
                       const CompareOptions& opts = {});

// Line diff of two texts (longest common subsequence; falls back to a prefix/suffix diff
// for very long inputs).
std::vector<ConfigDiffLine> diffLines(const std::string& a, const std::string& b);

}  // namespace stagescope::analysis
