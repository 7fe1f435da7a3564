// A run as the viewer holds it: the read model plus everything derived from it once, on the
// loading thread (row order, transfer->action links, causal replay order,
// transfer pairs ordered by send time, time per rank).  Immutable after loading; view state lives
// apart (ViewerState.h).  ImGui-free.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/analysis/Bubble.h"
#include "storage/RunModel.h"
#include "ui/CollectiveIndex.h"
#include "ui/RankRows.h"
#include "ui/ReplayOrder.h"
#include "ui/RunProblems.h"
#include "ui/TimeIndex.h"

namespace stagescope::ui {

struct LoadedRun {
  storage::RunModel model;
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
  double loadSeconds = 0, indexSeconds = 0;
};

// Derives the indexes of a loaded model.
std::shared_ptr<LoadedRun> indexRun(storage::RunModel model);

// Opens the run file `path` through storage::loadRun.  Throws storage::RunFileError (or
// std::exception) with a message naming the file.
std::shared_ptr<LoadedRun> openRun(const std::string& path,
                                   const std::function<void(float)>& progress = {});

// Payload bytes of one transfer (empty when unavailable).
std::vector<uint8_t> transferPayload(const LoadedRun& run, int64_t transferIndex);

}  // namespace stagescope::ui
