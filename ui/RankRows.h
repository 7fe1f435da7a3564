// Timeline row order: one row per rank, grouped by module (in the order data flows: module
// with the lowest first global stage first, config order on ties) and inside a module by
// grid coordinates (dp, then pp, then cp, then tp), so each data-parallel replica's pipeline
// reads top to bottom.  ImGui-free.
#pragma once

#include <string>
#include <vector>

#include "storage/RunModel.h"

namespace stagescope::ui {

struct RankRow {
  int rank = -1;
  int moduleIndex = -1;  // position in RunInfo::modules (-1: unknown module)
  bool firstOfModule = false;
  std::string label;  // "llm  tp1 pp2 dp0  r7"
};

std::vector<RankRow> orderRankRows(const storage::RunModel& model);

// The inverse: row index of every rank (-1 for ranks without a row).
std::vector<int> rowOfRank(const std::vector<RankRow>& rows, int worldSize);

}  // namespace stagescope::ui
