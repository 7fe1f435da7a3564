// The `[record]` filter of a run: which iterations, ranks and modules its ranks recorded.  One
// rule for every consumer: check, compare and the viewer read it with recordFilterOf and judge
// a filtered-out record as "skipped", never as "missing".
#pragma once

#include <string>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

// Empty list = everything.
struct RecordFilter {
  std::vector<int> iterations, ranks;
  std::vector<std::string> modules;
  bool any() const { return !iterations.empty() || !ranks.empty() || !modules.empty(); }
  bool wants(int iteration, const std::string& module, int rank) const;
  bool wantsRank(int rank, const std::string& module) const;
  std::string describe() const;  // "record.ranks = [0, 1]; record.iterations = [1]"
};

// The filter of a run, read from the `[record]` table of its config text (run.info.configText).
// Empty when the run has no config text (a captured run) or the text no longer parses (a file
// of another version): such a run is judged unfiltered.
RecordFilter recordFilterOf(const model::RunModel& run);

}  // namespace stagescope::analysis
