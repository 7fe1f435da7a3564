// Timeline row order: one row per rank, grouped by module (in the order data flows: module
// with the lowest first global stage first, config order on ties) and inside a module by
// grid coordinates (dp, then pp, then cp, then tp), so each data-parallel replica's pipeline
// reads top to bottom.  A colocated rank (several modules on one rank) is one row split into
// lanes, one per module it holds; colocated ranks form a group of their own after their first
// module's.  ImGui-free.
#pragma once

#include <string>
#include <vector>

#include "storage/RunFileError.h"

namespace stagescope::ui {

// One module a row's rank holds: its actions are drawn in this lane.
struct RankLane {
  int moduleIndex = -1;  // position in RunInfo::modules (-1: unknown module)
  std::string module;
  std::string label;  // "vision tp0 pp1 dp0"
};

struct RankRow {
  int rank = -1;
  int moduleIndex = -1;        // the group's module: the rank's first (lowest global stage)
  bool firstOfModule = false;  // the first row of its group (colocated ranks: a group of theirs)
  std::string label;           // "llm  tp1 pp2 dp0  r7"; a colocated rank: "r1  vision+audio+llm"
  // One lane per module the rank holds, by global stage; a rank of one module has one.
  std::vector<RankLane> lanes;
  bool shared() const { return lanes.size() > 1; }
  int laneCount() const { return lanes.empty() ? 1 : static_cast<int>(lanes.size()); }
  // The lane of an action or message side of `module` on a split row; -1 (drawn across the
  // whole row) on a row of one module, for a rank-wide action (module "") and for a module the
  // rank does not hold.
  int laneOf(const std::string& module) const;
};

std::vector<RankRow> orderRankRows(const model::RunModel& model);

// The inverse: row index of every rank (-1 for ranks without a row).
std::vector<int> rowOfRank(const std::vector<RankRow>& rows, int worldSize);

}  // namespace stagescope::ui
