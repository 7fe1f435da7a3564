// What every step of the Chrome trace export (ChromeTrace.cpp) reads, collected once from the
// run: the time origin, the slices' layout (TraceLayout.h), process ids, and where each
// transfer's action is.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "app/report/TraceLayout.h"
#include "core/analysis/Pairing.h"
#include "core/model/RunModel.h"

namespace stagescope::report {

// Process ids: one per module (its index + 1).  A colocated rank keeps one track (its actions
// never overlap), in the process of its first module; its thread name lists every module it
// holds and each slice names its module.  A rank of no known module gets a process of its
// own, numbered on from the modules in the order ranks are first asked about.
class ProcessIds {
 public:
  explicit ProcessIds(const model::RunModel& run);
  int ofModule(const std::string& module) { return pid_[module]; }
  // Memoised per rank (every event asks): a rank's pid is fixed by its first call.
  int ofRank(int rank);

 private:
  const model::RunModel& run_;
  std::map<std::string, int> pid_;
  std::vector<int> cache_;
};

// Refers to the run: it must outlive the context.
struct TraceContext {
  explicit TraceContext(const model::RunModel& r);
  // The slice of the action that posted `t`; null when that action was not recorded.
  const Span* spanOfAction(const events::TransferRecord& t) const;

  const model::RunModel& run;
  // Times come from the read model, where the reader already put every rank on rank 0's clock
  // (RunModel::clockOffsetsApplied); nothing is subtracted here.
  int64_t t0 = INT64_MAX;  // the earliest action or collective start (ns): the trace's ts 0
  int64_t tEnd = 0;        // the last recorded time: where a collective that never ended stops
  std::vector<std::vector<Span>> spans;                     // actionSpans(run)
  std::map<int, std::vector<CollectiveSlice>> collectives;  // collectiveSlices(run, tEnd)
  ProcessIds pids;
  const analysis::ActionIndex actionIndex;  // findAction's answers, without a rank-wide search
};

}  // namespace stagescope::report
