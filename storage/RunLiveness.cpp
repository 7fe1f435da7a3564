#include "storage/RunLiveness.h"

#include "storage/Merge.h"
#include "storage/RunFileLock.h"

namespace stagescope::storage {

std::string RunLiveness::summary() const {
  if (!live()) return "";
  std::string s = "live, " + std::to_string(writing.size());
  if (ranks > 0) s += " of " + std::to_string(ranks);
  return s + (ranks == 1 && writing.size() <= 1 ? " rank" : " ranks") + " still writing";
}

std::string RunLiveness::writers() const {
  std::string who;
  if (!writing.empty()) who = writing.front().path + " " + describeWriter(writing.front());
  if (!lockHolder.empty()) {
    who += (who.empty() ? "" : "; ") + std::string("its lock held by ") + lockHolder;
  }
  return who;
}

RunLiveness observeLiveness(const std::string& run, int worldSize) {
  RunLiveness out;
  const std::vector<std::string> shards = storage::findShards(run);  // rank shards, by rank
  out.ranks = worldSize > 0 ? worldSize : static_cast<int>(shards.size());
  out.writing = liveShards(shards);
  out.lockHolder = RunFileLock::holderOf(run);
  return out;
}

model::LiveState liveStateOf(const std::string& run, const model::RunModel& snapshot,
                             const RunLiveness& before) {
  if (snapshot.info.status != events::RunStatus::Running) return {};
  RunLiveness seen = observeLiveness(run, snapshot.info.worldSize);
  if (!seen.live()) {
    seen = before;  // it ended after the snapshot was read: the snapshot was of a live run
    seen.ranks = snapshot.info.worldSize;
  }
  return seen.state();
}

model::RunModel loadObserved(const std::string& run, const storage::LoadOptions& opts,
                             const std::function<void(float)>& progress, model::LiveState* live) {
  const RunLiveness before = observeLiveness(run, 0);
  model::RunModel m = storage::loadRun(run, opts, progress);
  if (live) *live = liveStateOf(run, m, before);
  return m;
}

}  // namespace stagescope::storage
