// The run overview: a small summary of the actions, written into the run file at the end of
// the merge so that a viewer can draw the run's structure (how busy each rank is over time,
// where iterations begin, where the bubbles are) before it has read the run itself.
//
// Tables (docs/run-file.md "overview"): `overview(rank, bucket, busy_ns, items)`,
// `overview_iterations(iteration, start_ns)` and `overview_span(start_ns, end_ns, buckets)`.  Times
// are on rank 0's clock (each rank's clock_offset_ns subtracted).  busy_ns is computing time:
// forward and backward actions only (waiting in a receive is the bubble, not busy).  The run's
// action span [start_ns, end_ns] is cut into kOverviewBuckets equal buckets; an action counts in
// the bucket where it starts (so busy_ns of a bucket may exceed its width when a long action starts
// there).  Files merged before this existed have no overview: readOverview returns nullopt and the
// viewer waits for the run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/Sqlite.h"

namespace stagescope::storage {

constexpr int kOverviewBuckets = 1024;

struct RunOverview {
  int64_t startNs = 0, endNs = 0;  // action span, rank 0's clock
  int buckets = 0;
  int64_t items = 0;  // actions summarised
  struct Row {
    int rank = 0;
    std::vector<int64_t> busyNs;  // [bucket]
    std::vector<int64_t> items;   // [bucket]
  };
  std::vector<Row> rows;                  // by rank
  std::vector<int64_t> iterationStartNs;  // [iteration]: earliest action start (INT64_MAX none)
  double bucketNs() const {
    return buckets > 0 ? static_cast<double>(endNs - startNs + 1) / buckets : 0;
  }
};

// Replaces the overview tables of an open run file (format 3: reads actions_rows and ranks).
void writeOverview(Db& db);

// The overview of the run file at `path`, or nullopt when it has none.  Throws RunFileError
// like loadRun when the file cannot be opened.
std::optional<RunOverview> readOverview(const std::string& path);

}  // namespace stagescope::storage
