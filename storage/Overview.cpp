#include "storage/Overview.h"

#include <algorithm>
#include <climits>
#include <map>

#include "core/events/Limits.h"
#include "storage/RunFileError.h"
#include "storage/Schema.h"

namespace stagescope::storage {
namespace {

// a - b and a + b with two's-complement wrap-around (values come from shards; a corrupt one
// must not be signed overflow).
int64_t wrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

// Each rank's clock_offset_ns (usually all 0), by rank; subtracted to put starts on rank 0's
// clock.
std::vector<int64_t> clockOffsets(Db& db) {
  std::vector<int64_t> off;
  Stmt s = db.prepare("SELECT rank, max(clock_offset_ns) FROM ranks GROUP BY rank");
  while (s.step()) {
    const int64_t r = s.i64(0);
    if (r < 0 || r >= events::limits::kMaxWorldSize || s.isNull(1)) continue;
    if (off.size() <= static_cast<size_t>(r)) off.resize(static_cast<size_t>(r) + 1, 0);
    off[static_cast<size_t>(r)] = s.i64(1);
  }
  return off;
}

// One action row as the overview needs it (readRow: false for a row without a rank or start,
// which has no place in the overview).
struct Row {
  int64_t rank = 0, iteration = 0, start = 0, duration = 0;  // start on rank 0's clock
  bool hasIteration = false, hasDuration = false;
  bool computing = false;  // a forward or backward action (busy_ns counts only these)
};
bool readRow(const Stmt& s, const std::vector<int64_t>& offsets,
             const std::vector<int64_t>& computingKinds, Row* r) {
  if (s.isNull(0) || s.isNull(2)) return false;
  r->rank = s.i64(0);
  r->hasIteration = !s.isNull(1);
  r->iteration = s.i64(1);
  const int64_t off =
      r->rank >= 0 && static_cast<size_t>(r->rank) < offsets.size() ? offsets[r->rank] : 0;
  r->start = wrapSub(s.i64(2), off);
  r->hasDuration = !s.isNull(3);
  r->duration = wrapSub(s.i64(3), s.i64(2));
  r->computing = !s.isNull(4) && std::find(computingKinds.begin(), computingKinds.end(),
                                           s.i64(4)) != computingKinds.end();
  return true;
}

}  // namespace

// Two streaming passes over actions_rows (nothing materialised but the result: ranks x buckets
// and one start per iteration): the span and each iteration's first start, then the buckets,
// where busy_ns sums the durations of forward and backward actions only (Overview.h).
// The bucket of a start s is min(buckets - 1, trunc((s - t0) * buckets / (t1 - t0 + 1))) in
// double arithmetic, as docs/run-file.md defines it.
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
  const std::vector<int64_t> offsets = clockOffsets(db);
  const char* scan = "SELECT rank, iteration, start_ns, end_ns, kind_id FROM actions_rows";
  std::vector<int64_t> computingKinds;  // text ids of the kinds F and B
  {
    Stmt k = db.prepare("SELECT id FROM texts WHERE text IN ('F', 'B')");
    while (k.step()) computingKinds.push_back(k.i64(0));
  }
  // Pass 1: the span [t0, t1] and each iteration's earliest start.
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  bool any = false;
  std::map<int64_t, int64_t> iterationStart;
  {
    Stmt s = db.prepare(scan);
    Row r;
    auto last = iterationStart.end();
    while (s.step()) {
      if (!readRow(s, offsets, computingKinds, &r)) continue;
      any = true;
      t0 = std::min(t0, r.start);
      if (r.hasDuration) t1 = std::max(t1, wrapAdd(r.start, r.duration));
      if (!r.hasIteration) continue;
      if (last == iterationStart.end() || last->first != r.iteration)  // rows come in runs
        last = iterationStart.try_emplace(r.iteration, r.start).first;
      last->second = std::min(last->second, r.start);
    }
  }
  if (!any) {
    tx.commit();
    return;
  }
  if (t1 == INT64_MIN) t1 = t0;
  {
    Stmt ins = db.prepare("INSERT INTO overview_span VALUES (?, ?, ?)");
    ins.bind(1, t0);
    ins.bind(2, t1);
    ins.bind(3, static_cast<int64_t>(kOverviewBuckets));
    ins.run();
    Stmt it = db.prepare("INSERT INTO overview_iterations VALUES (?, ?)");
    for (const auto& [iteration, start] : iterationStart) {
      it.bind(1, iteration);
      it.bind(2, start);
      it.run();
    }
  }
  // Pass 2: per (rank, bucket) the summed durations and the count.
  struct Bucket {
    int64_t busy = 0, items = 0;
    bool hasBusy = false;
  };
  std::map<int64_t, std::vector<Bucket>> ranks;
  const double width = static_cast<double>(wrapAdd(wrapSub(t1, t0), 1));
  {
    Stmt s = db.prepare(scan);
    Row r;
    auto last = ranks.end();
    while (s.step()) {
      if (!readRow(s, offsets, computingKinds, &r)) continue;
      if (last == ranks.end() || last->first != r.rank)
        last = ranks.try_emplace(r.rank, std::vector<Bucket>(kOverviewBuckets)).first;
      const auto b = static_cast<size_t>(std::min<int64_t>(
          kOverviewBuckets - 1, static_cast<int64_t>(static_cast<double>(wrapSub(r.start, t0)) *
                                                     kOverviewBuckets / width)));
      Bucket& k = last->second[b];
      ++k.items;
      if (!r.computing) {
        k.hasBusy = true;  // counts 0
      } else if (r.hasDuration) {
        k.busy = wrapAdd(k.busy, r.duration);
        k.hasBusy = true;
      }
    }
  }
  Stmt ins = db.prepare("INSERT INTO overview VALUES (?, ?, ?, ?)");
  for (const auto& [rank, buckets] : ranks) {
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (buckets[b].items == 0) continue;
      ins.bind(1, rank);
      ins.bind(2, static_cast<int64_t>(b));
      if (buckets[b].hasBusy)
        ins.bind(3, buckets[b].busy);
      else
        ins.bindNull(3);
      ins.bind(4, buckets[b].items);
      ins.run();
    }
  }
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
