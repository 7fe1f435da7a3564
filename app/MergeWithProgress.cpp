#include "app/MergeWithProgress.h"

#include <cstdio>

#include "app/report/Progress.h"

namespace stagescope::app {

storage::MergeResult mergeWithProgress(const std::string& run,
                                       const std::vector<std::string>& shards) {
  report::Progress bar("merging " + std::to_string(shards.size()) + " shard(s) into " + run,
                       shards.size() + 2, stderr, -1, /*quietForSeconds=*/1.0);
  storage::MergeResult result =
      storage::mergeShards(run, shards, [&bar](size_t done, size_t total) {
        bar.setTotal(total);
        bar.update(done);
      });
  bar.finish();
  return result;
}

}  // namespace stagescope::app
