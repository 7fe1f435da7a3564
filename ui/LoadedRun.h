// A run as the viewer holds it: the read model plus everything derived from it once, on the
// loading thread (row order, transfer->action links, causal replay order,
// transfer pairs ordered by send time, time per rank).  View state lives apart (ViewerState.h).
// ImGui-free.
//
// Loaded in two phases (docs/viewer.md: "Large runs"): openTimeline reads what the timeline,
// grid map, transfers and replay need (storage::LoadOptions::timelineOnly) and indexes it: the run
// is interactive.  On another thread, readDetails reads the rest (plan, gradients, losses,
// inputs, reference: LoadOptions::detailsOnly; the viewer starts it together with the timeline);
// once the timeline is in, the owning thread checks both came from the same run (checkSameRun),
// merges the details in (mergeDetails), judgeRun computes the verdicts over the whole model, and
// completeDetails takes them.  Only then is `detailsLoaded` true.  Apart from those two calls a
// LoadedRun is immutable.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/analysis/Bubble.h"
#include "storage/RunFileError.h"
#include "ui/CollectiveIndex.h"
#include "ui/RankRows.h"
#include "ui/ReplayOrder.h"
#include "ui/RunProblems.h"
#include "ui/TimeIndex.h"

namespace stagescope::ui {

struct LoadedRun {
  model::RunModel model;
  std::vector<RankRow> rows;
  std::vector<int> rowOfRank;
  std::vector<PairActions> pairActions;
  std::vector<int32_t> pairsBySendStart;  // pair indices with both sides, by send action start
  std::vector<int64_t> pairSendStart;     // parallel to pairsBySendStart
  ReplayOrder replay;
  analysis::TimeBreakdown time;           // time per rank and the bubble (core/analysis)
  std::vector<int32_t> transferPair;      // transfer index -> pair index (-1)
  RunProblems problems;                   // rank fates, stuck actions, wait-for edges, first NaN
  std::vector<int64_t> iterationStartNs;  // [iteration]: earliest action start (INT64_MAX: none)
  // [rank]: its actions' times as columns (TimeIndex), parallel to model.actions[rank]: what
  // the timeline searches and shades every frame.
  std::vector<TimeColumns> actionTimes;
  CollectiveIndex collectives;  // captured runs: collectives across groups
  // False while the details are loading: model.plan, gradients, losses, inputs and the
  // reference are empty and `problems` is not computed.  Nothing that reads them (fates and
  // stuck actions, NaN/Inf, corrupted messages, plots, the gradient and loss inspector, find over
  // gradients, the compare) may run or show before; each says "loading details…" instead.
  bool detailsLoaded = false;
  // "live, N of M ranks still writing (...)" when the run was being written as its timeline
  // was read (storage/RunLiveness.h): the view is a snapshot and the banner says so; "" otherwise.
  std::string live;
  double loadSeconds = 0, indexSeconds = 0;  // the timeline: read, index
  double detailsSeconds = 0;  // the details: read (alongside the timeline's), merge, judge

  // The fate of `rank` (problems.ranks), or nullptr while the details load (no verdict yet)
  // or for a rank out of range.
  const RankProblem* fateOf(int rank) const {
    if (!detailsLoaded || rank < 0 || rank >= static_cast<int>(problems.ranks.size()))
      return nullptr;
    return &problems.ranks[static_cast<size_t>(rank)];
  }
};

// Derives the indexes of a whole loaded model (details included: detailsLoaded is true).
std::shared_ptr<LoadedRun> indexRun(model::RunModel model);

// Opens the whole run file `path` (both phases, one after the other).  Throws
// storage::RunFileError (or std::exception) with a message naming the file.
std::shared_ptr<LoadedRun> openRun(const std::string& path,
                                   const std::function<void(float)>& progress = {});

// Phase 1: the timeline of `path` and its indexes, details not loaded.  Throws like openRun.
std::shared_ptr<LoadedRun> openTimeline(const std::string& path,
                                        const std::function<void(float)>& progress = {});
// Phase 2 (any thread; reads the file only): the details of `path` (LoadOptions::detailsOnly).
// May run while openTimeline reads the same file (its own SQLite connection).  Throws like
// openRun.
model::RunModel readDetails(const std::string& path,
                            const std::function<void(float)>& progress = {});
// Throws storage::RunFileError (naming run.model.path) unless `details` were read from the same
// run as `run`'s timeline (run id, config hash, status, end time, schema version): a file
// replaced between the two reads would pair one run's timeline with another's gradients.
void checkSameRun(const LoadedRun& run, const model::RunModel& details);
// readDetails(run.model.path) then checkSameRun.
model::RunModel loadDetails(const LoadedRun& run, const std::function<void(float)>& progress = {});
// Moves `details` into run.model.  Call with no other thread reading `run`.
void mergeDetails(LoadedRun& run, model::RunModel&& details);
// The verdicts over the whole (merged) model: findProblems.  Only reads `run`.
RunProblems judgeRun(const LoadedRun& run);
// Takes the verdicts: detailsLoaded becomes true.  Call with no other thread reading `run`.
void completeDetails(LoadedRun& run, RunProblems&& problems);

// Payload bytes of one transfer (empty when unavailable).
std::vector<uint8_t> transferPayload(const LoadedRun& run, int64_t transferIndex);

}  // namespace stagescope::ui
