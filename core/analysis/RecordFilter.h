// The `[record]` filter of a run: which iterations, ranks and modules its ranks recorded.  One
// rule for everyone: the engine's FilteringRecorder drops records by events::RecordFilter::keeps,
// and check, compare and the viewer read the filter a run applied with recordFilterOf and judge
// by the same keeps() that a filtered-out record is "skipped", never "missing".
#pragma once

#include <string>

#include "core/events/Events.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

// events::RecordFilter (empty list = everything) with the words the verdicts use.
struct RecordFilter : events::RecordFilter {
  bool any() const { return !all(); }
  bool wants(int iteration, const std::string& module, int rank) const {
    return keeps(iteration, module, rank);
  }
  bool wantsRank(int rank, const std::string& module) const { return keepsRank(rank, module); }
  // Whether rank `rank`'s records of `iteration` were kept: a rank holding several modules
  // (colocated) records everything when the filter keeps any of them, as the engine's
  // events::FilteringRecorder does.  The rule every check and coverage applies to a rank.
  bool wantsRankOf(const model::RunModel& run, int iteration, int rank) const;
  std::string describe() const;  // "record.ranks = [0, 1]; record.iterations = [1]"
};

// The filter a run's ranks applied: the one its run file recorded (run.info.recordFilter,
// format 2, or set on a model built in memory).  A format-1 file has none: its config text's
// `[record]` table is read instead (nothing when the text no longer parses: such a run is judged
// unfiltered).
RecordFilter recordFilterOf(const model::RunModel& run);

}  // namespace stagescope::analysis
