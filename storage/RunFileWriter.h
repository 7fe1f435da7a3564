// Writes a whole in-memory RunModel as a run file, through the same path a recorded run takes:
// one ShardWriter per rank, then the merge, then the run's final status.  Used to turn
// generated runs (tests, benchmarks, planted-defect corpora) into real run files.
#pragma once

#include <string>

#include "storage/RunFileError.h"

namespace stagescope::storage {

// Creates `path` (and its shards, removed after the merge).  Refuses an existing `path` or
// shard: throws std::runtime_error naming the file.  Throws when writing or merging fails.
void writeRunFile(const model::RunModel& model, const std::string& path);

}  // namespace stagescope::storage
