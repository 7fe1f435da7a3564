// A synthetic run generator: simulates the multimodule 1F1B schedule (encoders feeding a
// language model, each on its own TP x PP x DP grid at a rank offset) with a simple cost
// model and returns the RunModel a recorded run of that layout would load into.  Used by
// the viewer's tests, the GUI fixtures (written with storage::writeRunFile) and bench_gui;
// ImGui-free and torch-free.
//
// Checksums, norms and losses depend only on logical identity (edge, direction, iteration,
// microbatch, data-parallel replica; parameter name), so two layouts of the same spec with
// the same seed compare equal, as the layout-independence contract promises.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "storage/RunFileError.h"

namespace stagescope::testing {

// A module's grid at a rank offset.  Modules may share ranks (colocation): a rank then holds
// one stage of each, run in one 1F1B order (see makeSyntheticRun).
struct SynthModule {
  std::string name;
  std::string kind = "encoder";  // "encoder" | "llm" (exactly one llm, the sink)
  int tp = 1, pp = 1, dp = 1;
  int offset = 0;
  int layers = 2;
};

struct SyntheticSpec {
  std::vector<SynthModule> modules;  // encoders first, the llm last
  int iterations = 2;
  int microbatches = 4;
  uint64_t seed = 1234;
  int paramsPerLayer = 3;
  bool gradients = true;
  std::vector<int64_t> clockSkewNs;  // per rank, added to every recorded time of that rank
  // The receive side of this message sees a different checksum (a corrupted transfer).
  int corruptIteration = -1, corruptMicrobatch = -1;
  // Every value from (iteration, microbatch) on differs (a diverging run for compare).
  int divergeIteration = -1, divergeMicrobatch = -1;
  // A NaN appears in the activation of this microbatch.
  int nanIteration = -1, nanMicrobatch = -1;
  // Executed order deviates from the plan on this rank (two compute actions swapped).
  int deviationRank = -1;
  // Fraction of messages that take extra time (jitter), for realistic idle gaps.
  double slowFraction = 0.1;
};

// vision (tp1 pp2 dp2 @0) feeding llm (tp2 pp3 dp1 @4): 10 ranks, 5 global stages, fan-in.
SyntheticSpec defaultSyntheticSpec();
// The same mathematics on another layout (llm tp1 pp3 dp1 @4, vision unchanged): 7 ranks.
SyntheticSpec alternateLayoutSpec();
// Colocation (modules sharing ranks; the ranks table has one row per (rank, module)):
// vision (tp1 pp2 @0), audio (tp1 pp1 @1) and llm (tp1 pp3 @1): rank 1 holds vision's last
// stage, audio and llm stage 0, so both bridges are local hand-offs on rank 1 (src == dst).
SyntheticSpec colocatedSyntheticSpec();
// Two encoders on the same ranks: vision and audio (tp2 pp1 @0) feeding llm (tp1 pp2 @2).
SyntheticSpec colocatedEncodersSpec();
// A spec whose run holds about `events` events (actions + transfers + gradients + losses).
SyntheticSpec benchmarkSpec(size_t events);

model::RunModel makeSyntheticRun(const SyntheticSpec& spec);

// Actions + transfers + gradients + losses (what RunModel::eventCount counts).
size_t countEvents(const model::RunModel& model);

// Ends a generated run early, as a crash or a hang would: rank r keeps the actions that ended
// by cutNs[r] (relative to the run's first action) with their transfers, and its gradients
// and losses of the iterations it finished; the plan stays whole.  Pairs are rebuilt.
void endRunEarly(model::RunModel& model, const std::vector<int64_t>& cutNs);

// Fills RunModel::pairs by the one pairing rule (core/model/Pairing.h); exposed for tests.
void buildPairs(model::RunModel& model);

}  // namespace stagescope::testing
