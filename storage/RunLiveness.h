// Whether a run is live: being written while a command looks at it (docs/run-file.md "A run's
// life").  Seen from this host's /proc: a rank shard `RUN.rank<i>.shard` that a live process
// holds open (LiveShards.h), and `RUN.lock` held by a live stagescope (RunFileLock.h).  A
// worker's heartbeats are in its job's store, which only the ranks reach; from the files, its
// open shard is the sign that it is still writing.
//
// A run counts as live only while its run file (or, with no run file yet, its shards) does not
// hold a judged status: once `run` or `merge` wrote completed / failed / hung / killed, a
// process holding one of its kept shards open is a reader (a viewer, the sqlite3 shell), not a
// rank.  Observing never changes anything (nothing is opened for writing, no lock is taken).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/model/LiveState.h"
#include "storage/LiveShards.h"
#include "storage/RunFileError.h"
#include "storage/RunReader.h"

namespace stagescope::storage {

struct RunLiveness {
  int ranks = 0;                   // M: the run's world size (0: unknown, no run file)
  std::vector<LiveShard> writing;  // the rank shards a live process holds open, by rank
  std::string lockHolder;  // "stagescope pid P on host H" holding RUN.lock, or "" (not held)

  bool live() const { return !writing.empty() || !lockHolder.empty(); }
  // "live, N of M ranks still writing" (M unknown: "live, N ranks still writing"); "" when
  // not live.  Every command that looks at a live run prints this phrase.
  std::string summary() const;
  // Who writes: "RUN.rank0.shard being written by pid P on host H; its lock held by stagescope
  // pid Q on host H"; "" when not live.
  std::string writers() const;
  // The summary and who writes, as the parts a command prints (model::LiveState): its line()
  // is "live, 2 of 3 ranks still writing (RUN.rank0.shard being written by ...)".
  model::LiveState state() const { return {summary(), writers()}; }
  std::string line() const { return state().line(); }
};

// What this host sees of `run`'s writers now.  `worldSize` is the run file's (<= 0: count the
// rank shards found beside it).
RunLiveness observeLiveness(const std::string& run, int worldSize);

// The live state of `snapshot`, read from `run` after `before` was observed: RunLiveness::state()
// of what is seen now, or of `before` when the writers ended meanwhile; not live (both parts
// "") when neither saw a writer, or the snapshot's status is not running.  A live run is never
// complete: `check` fails its run_status, `compare` calls it INCOMPLETE, the viewer says so in
// its banner.
model::LiveState liveStateOf(const std::string& run, const model::RunModel& snapshot,
                             const RunLiveness& before);
// loadRun with liveness observed around it: the live state into `*live` (when not null).
model::RunModel loadObserved(const std::string& run, const storage::LoadOptions& opts,
                             const std::function<void(float)>& progress, model::LiveState* live);

}  // namespace stagescope::storage
