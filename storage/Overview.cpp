#include "storage/Overview.h"

#include <algorithm>
#include <climits>

#include "core/events/Limits.h"
#include "storage/RunModel.h"
#include "storage/Schema.h"

namespace stagescope::storage {
namespace {

// The start of an action of `actions_rows` on rank 0's clock: start_ns minus its rank's
// clock_offset_ns, as a CASE over the ranks whose offset is not 0 (usually none).
std::string shiftedStart(Db& db) {
  std::string cases;
  Stmt s = db.prepare(
      "SELECT rank, max(clock_offset_ns) FROM ranks GROUP BY rank HAVING max(clock_offset_ns) != "
      "0");
  while (s.step())
    cases += " WHEN " + std::to_string(s.i64(0)) + " THEN " + std::to_string(s.i64(1));
  return cases.empty() ? "start_ns" : "(start_ns - CASE rank" + cases + " ELSE 0 END)";
}

}  // namespace

void writeOverview(Db& db) {
  Transaction tx(db);
  db.exec(
      "CREATE TABLE IF NOT EXISTS overview (rank INTEGER, bucket INTEGER, busy_ns INTEGER, "
      "items INTEGER, PRIMARY KEY (rank, bucket)) WITHOUT ROWID;"
      "CREATE TABLE IF NOT EXISTS overview_iterations (iteration INTEGER PRIMARY KEY, "
      "start_ns INTEGER);"
      "CREATE TABLE IF NOT EXISTS overview_span (start_ns INTEGER, end_ns INTEGER, "
      "buckets INTEGER);"
      "DELETE FROM overview; DELETE FROM overview_iterations; DELETE FROM overview_span;");
  const std::string n = std::to_string(kOverviewBuckets);
  const std::string s = shiftedStart(db);
  // Three passes over actions_rows, none materialised: span, iterations, buckets.
  db.exec(
      "INSERT INTO overview_span SELECT min(" + s + "), max(" + s + " + end_ns - start_ns), " + n +
      " FROM actions_rows HAVING count(*) > 0;"
      "INSERT INTO overview_iterations SELECT iteration, min(" +
      s +
      ") FROM actions_rows GROUP BY iteration;"
      "INSERT INTO overview SELECT rank, min(" +
      n + " - 1, CAST((" + s + " - t0) * " + n +
      ".0 / (t1 - t0 + 1) AS INTEGER)) AS b, "
      "sum(CASE WHEN kind_id IN (SELECT id FROM texts WHERE text IN ('F', 'B')) "
      "THEN end_ns - start_ns ELSE 0 END), count(*) FROM "
      "actions_rows, (SELECT start_ns AS t0, end_ns AS t1 FROM overview_span) GROUP BY rank, b;");
  tx.commit();
}

std::optional<RunOverview> readOverview(const std::string& path) {
  Db db = openStagescopeFile(path, false);
  try {
    if (!db.hasTable("overview") || !db.hasTable("overview_iterations") ||
        !db.hasTable("overview_span"))
      return std::nullopt;
    RunOverview o;
    {
      Stmt s = db.prepare("SELECT start_ns, end_ns, buckets FROM overview_span");
      if (!s.step() || s.isNull(0)) return std::nullopt;  // no actions
      o.startNs = s.i64(0);
      o.endNs = s.i64(1);
      if (s.i64(2) != kOverviewBuckets || o.endNs < o.startNs)
        throw RunFileError(RunFileError::Kind::Corrupt,
                           path + ": table overview_span: buckets " + std::to_string(s.i64(2)) +
                               " (expected " + std::to_string(kOverviewBuckets) + "), span " +
                               std::to_string(o.startNs) + ".." + std::to_string(o.endNs));
      o.buckets = kOverviewBuckets;
    }
    Stmt s = db.prepare("SELECT rank, bucket, busy_ns, items FROM overview ORDER BY rank, bucket");
    while (s.step()) {
      const int64_t rank = s.i64(0), bucket = s.i64(1);
      if (rank < 0 || rank >= events::limits::kMaxWorldSize || bucket < 0 || bucket >= o.buckets)
        throw RunFileError(RunFileError::Kind::Corrupt,
                           path + ": table overview: rank " + std::to_string(rank) + " bucket " +
                               std::to_string(bucket) + " out of range");
      if (o.rows.empty() || o.rows.back().rank != rank) {
        o.rows.push_back({static_cast<int>(rank), std::vector<int64_t>(o.buckets, 0),
                          std::vector<int64_t>(o.buckets, 0)});
      }
      o.rows.back().busyNs[bucket] = s.i64(2);
      o.rows.back().items[bucket] = s.i64(3);
      o.items += s.i64(3);
    }
    Stmt it = db.prepare("SELECT iteration, start_ns FROM overview_iterations ORDER BY iteration");
    while (it.step()) {
      const int64_t i = it.i64(0);
      if (i < 0 || i >= events::limits::kMaxIterations) continue;
      if (o.iterationStartNs.size() <= static_cast<size_t>(i))
        o.iterationStartNs.resize(static_cast<size_t>(i) + 1, INT64_MAX);
      o.iterationStartNs[static_cast<size_t>(i)] = it.i64(1);
    }
    return o;
  } catch (const SqliteError& e) {
    throw RunFileError(RunFileError::Kind::Corrupt, std::string(e.what()) + " (overview)");
  }
}

}  // namespace stagescope::storage
