// The collectives of a captured run as the viewer draws them: the instances
// (analysis::collectiveInstances: members grouped by group, iteration and number, with their
// agreement) ordered by when their first member was posted, so the timeline finds the visible
// ones by binary search.  ImGui-free; built once on the loading thread (LoadedRun).
#pragma once

#include <cstdint>
#include <vector>

#include "core/analysis/Collectives.h"
#include "storage/RunFileError.h"

namespace stagescope::ui {

struct CollectiveIndex {
  std::vector<analysis::CollectiveInstance> instances;
  std::vector<int32_t> byStart;  // instance indices by firstStartNs
  std::vector<int64_t> startNs;  // parallel to byStart
  int64_t maxSpanNs = 0;         // longest instance (first post to last completion or run end)
  int64_t endOfRunNs = 0;        // where an instance with a member that never ended stops

  // The end drawn for instance `i`: its last completion, or the end of the run.
  int64_t endOf(const analysis::CollectiveInstance& c) const {
    return c.lastEndNs != 0 ? c.lastEndNs : endOfRunNs;
  }
  // Instances (indices into `instances`) that overlap [t0, t1], in start order.
  std::vector<int32_t> visible(int64_t t0, int64_t t1) const;
};

CollectiveIndex indexCollectives(const model::RunModel& model);

}  // namespace stagescope::ui
