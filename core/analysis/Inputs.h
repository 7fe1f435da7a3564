// The `inputs` table judged against the layout: each replica's samples are the ones the layout
// assigns (docs/model.md, "Data"; Samples.h).
//
// Every recorded row (module, rank -> dp replica, iteration, microbatch) is cut into its samples
// along the batch axis; sample i of the row must be global sample firstSample(module, dp,
// microbatch) + i of its iteration, and its values must be that sample's, regenerated from the
// run's seed without reading the row (Samples.h regenerateTokens / regeneratePatches).  Both ends
// of a fan-in or fan-out bridge are pinned to global sample indices this way, so an encoder
// replica that recorded (or was fed) another replica's samples is caught even where every
// message, loss and gradient is right; the finding names the global sample the row holds
// instead when it is one of its iteration's global batch.
//
// What cannot be judged is counted, never passed: rows without payload (loaded without
// payloads), patches of fewer than 16 values (another LibTorch generator path, not ported), a run
// without a stagescope config (a captured job: no layout to derive samples from).
//
// Coverage: a completed run at level full records one row per first-stage rank (every TP rank),
// iteration and microbatch its record filter keeps; missingRows lists the others.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/analysis/RecordFilter.h"
#include "core/analysis/Samples.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

// One sample of one recorded input row.
struct InputSample {
  size_t row = 0;       // index into run.inputs
  int dp = -1;          // the recording rank's replica of the row's module
  int64_t sample = -1;  // global sample index within the row's iteration
  int index = 0;        // position along the row's batch axis
};

// Every sample of every row the layout places (the rank holds the row's module and the row's
// batch axis is the module's samples per replica); `unplaced` names the other rows.
struct InputSamples {
  std::vector<InputSample> samples;  // in row order
  std::vector<std::string> unplaced;
};
InputSamples inputSamplesOf(const model::RunModel& run, const SampleLayout& layout);

// The bytes of sample `index` of row `in` ([count, ...]): empty when the row has no payload or
// its payload is not `count` equal parts.
std::span<const uint8_t> sampleBytes(const events::InputRecord& in, int index);

struct InputsReport {
  size_t rows = 0;                      // rows judged (placed by the layout)
  size_t samplesJudged = 0;             // samples whose values were regenerated and compared
  size_t samplesNotRegenerated = 0;     // placed, values not compared (no payload, < 16 values)
  std::string notJudged;                // why no row was judged ("" when rows were)
  std::vector<std::string> mismatches;  // one sentence per wrong row (its first wrong sample)
  std::vector<int> mismatchRanks, mismatchIterations;  // parallel to mismatches
  size_t rowsExpected = 0;                             // by the layout (level full, completed)
  std::vector<std::string> missingRows;                // expected, not recorded
  std::string summary() const;
};
// The recorded rows against the layout's samples (rows, samplesJudged, mismatches, ...).
InputsReport judgeInputs(const model::RunModel& run);
// The rows a completed level-full run must hold (rowsExpected, missingRows); `filter`: the
// run's record filter (rows outside it are not expected).
InputsReport inputRowCoverage(const model::RunModel& run, const RecordFilter& filter);

}  // namespace stagescope::analysis
