// A merge that shows how far it is: `run` and `merge` both merge through this.
#pragma once

#include <string>
#include <vector>

#include "storage/Merge.h"

namespace stagescope::app {

// storage::mergeShards with a progress line on stderr ("merging 8 shards into RUN": a redrawn
// bar with N/total, rate and time left on a terminal, a line per 10 % otherwise), shown only
// when the merge takes more than a second.  Throws what mergeShards throws.
storage::MergeResult mergeWithProgress(const std::string& run,
                                       const std::vector<std::string>& shards);

}  // namespace stagescope::app
