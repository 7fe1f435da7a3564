// Run-file creation, status updates and the merge of rank shards into the run file.
//
// Naming convention: the shard of rank N of run file "<dir>/<name>" is
// "<dir>/<name>.rank<N>.shard" (shardPathFor).  findShards lists the shards next to a run file.
//
// Merge protocol (docs/run-file.md "Merge"): shards are ATTACHed in groups of at most 9; each
// shard is copied with INSERT…SELECT in its own transaction, after a committed `shards` row in
// state 'merging'.  The copy replaces any rows of an earlier merge of the same shard file, and
// its transaction sets the state to 'merged'.  A crash leaves the state 'merging' (detectable,
// and a re-run fixes it).  A missing or unreadable shard is recorded ('missing' / 'failed')
// with a note, never fatal.  A shard whose `run` row names another run id or config hash than
// the run file's is recorded 'refused' with a one-line note and none of its rows are copied
// (a shard or run file without a `run` row is not compared).  Read indexes are created at the
// end.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::storage {

// "<runPath>.rank<rank>.shard".
std::string shardPathFor(const std::string& runPath, int rank);
// The shard files next to runPath by the naming convention, sorted by rank.
std::vector<std::string> findShards(const std::string& runPath);

// Creates a new run file: schema, the `run` row (status running unless info says otherwise)
// and the modules.  Throws std::runtime_error if the file exists, SqliteError on I/O failure.
void createRunFile(const std::string& path, const events::RunInfo& info);
// Sets run.status, run.status_reason and run.end_unix_ms.  Throws RunFileError / SqliteError.
void updateRunStatus(const std::string& path, events::RunStatus status, const std::string& reason,
                     int64_t endUnixMs);

struct ShardMergeInfo {
  std::string path;
  int rank = -1;
  std::string state;  // "merged", "missing", "failed", "refused" (another run or config)
  std::string note;   // why not merged
  int64_t rows = 0;   // rows copied
};

struct MergeResult {
  std::vector<ShardMergeInfo> shards;  // in the order given
  int merged = 0, failed = 0, missing = 0, refused = 0;
  int64_t rows = 0;
  double seconds = 0;
  std::vector<std::string> notes;  // one line per shard not merged
  bool ok() const { return failed == 0 && missing == 0 && refused == 0; }
};

// How far a merge is: `done` of `total` steps, one per shard copied, then the read indexes and
// the overview (the two long steps after the copies).  Called from the merging thread.
using MergeProgress = std::function<void(size_t done, size_t total)>;

// Merges the shards into the run file (see the protocol above).  Re-runnable: merging a shard
// again replaces its rows.  Throws RunFileError when runPath is not a run file.  `progress`,
// when given, is called after each step.
MergeResult mergeShards(const std::string& runPath, const std::vector<std::string>& shardPaths,
                        const MergeProgress& progress = {});

// Removes the shards the run file records as merged (`RUN.rank<N>.shard`, `RUN.launcher.shard`,
// `RUN.exits.shard`, `RUN.reference.shard`, with SQLite's -wal/-shm beside them), so that a
// finished run is one file. Only files beside the run file whose name is the run file's name,
// a dot, anything, then ".shard" are touched. Returns the paths removed.
std::vector<std::string> removeMergedShards(const std::string& runPath);

// The `run` row of a shard (run id, config hash, config text, versions), or nullopt when the
// shard has none.  Throws RunFileError when the file is not a stagescope file.
std::optional<events::RunInfo> readShardRunInfo(const std::string& shardPath);

}  // namespace stagescope::storage
