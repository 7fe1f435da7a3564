// bench_writer: throughput of the storage layer (not a test).
//
// Prints, in one process: rows/s of ShardWriter (records built and enqueued on this thread,
// the writer thread inserting them, to a durable close) and of two plain SQLite loops that
// insert the same rows, the time to merge 8 shards, and the time to load the merged run.
//
// The same rows: rank 0's actions (kind text, module "llm", peers "1", the same integers),
// into the shard's `actions` table, same schema, same pragmas (WAL, synchronous=NORMAL).
// The plain loops bind pre-made values on one thread and commit every 8192 rows; the writer
// commits what is pending (at least every 8192 rows or 50 ms).  Every side is timed from
// before its file is created to after its connection is closed (the final WAL checkpoint).
//   plain   : one prepared single-row INSERT per row: the textbook loop, the reference of the
//             target "writer >= 0.9 x the plain SQLite loop".
//   plain16 : prepared INSERTs of 16 rows each: the SQL the writer itself issues, so the ratio
//             to it is the writer's own cost (records, queue, hand-off, list texts) over SQLite.
//
// A ratio is writer rows/s ÷ plain rows/s (= plain seconds ÷ writer seconds) within one
// repetition; each repetition runs the three in a rotating order, and the reported ratio is
// the median of the per-repetition ratios, every repetition listed.  CPU seconds (user + sys,
// both writer threads together) are printed too: on a loaded machine they are the robust
// measure.
//
// Usage: bench_writer [rows=2000000] [dir=/tmp] [reps=5] [only=plain|plain16|writer]
//   only: time just that side, once (for perf record); no ratio, no merge.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/Schema.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

using namespace stagescope;
using namespace stagescope::storage;
namespace fs = std::filesystem;

namespace {

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// CPU seconds (user + sys) of the whole process so far: both threads of the writer.
double processCpu() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

events::ActionRecord action(int rank, int i) {
  events::ActionRecord a;
  a.rank = rank;
  a.iteration = i / 64;
  a.seq = i % 64;
  a.kind = static_cast<events::ActionKind>(i % 8);
  a.microbatch = (i % 64) / 2;
  a.module = "llm";
  a.stage = rank;
  a.peers = {rank + 1};
  a.startNs = 1000LL * i;
  a.endNs = 1000LL * i + 700;
  return a;
}

void removeDb(const std::string& p) {
  for (const char* s : {"", "-wal", "-shm", "-journal"}) ::unlink((p + s).c_str());
}

struct Timing {
  double wall = 0, cpu = 0;
};

// The floor: the rows of action(0, i) through a prepared INSERT of `perStatement` rows
// (bind, step, reset), 8192 rows per BEGIN IMMEDIATE transaction, the shard's pragmas; from
// file creation to close.  perStatement 1 is the textbook loop (the target's reference);
// perStatement 16 is the same SQL the writer issues, so the ratio to it is the writer's own
// cost (records, queue, thread hand-off, list texts) on top of SQLite.
Timing plainLoop(const std::string& path, int rows, int perStatement) {
  removeDb(path);
  const double cpu0 = processCpu();
  const auto t0 = std::chrono::steady_clock::now();
  {
    Db db(path, Db::Mode::Create);
    db.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
    createSchema(db, FileKind::Shard);
    const TableDef& def = tableDef("actions");
    Stmt one = db.prepare(insertSql(def));
    Stmt many = db.prepare(insertSql(def, "INSERT", perStatement));
    const int columns = dataColumnCount(def);
    db.exec("BEGIN IMMEDIATE");
    int i = 0;
    while (i < rows) {
      if (i > 0 && i % 8192 == 0) db.exec("COMMIT; BEGIN IMMEDIATE");
      // A statement's rows never straddle a commit (8192 is a multiple of 1 and 16).
      Stmt& ins = rows - i >= perStatement ? many : one;
      const int n = &ins == &many ? perStatement : 1;
      for (int k = 0; k < n; ++k, ++i) {
        const int b = k * columns;
        ins.bind(b + 1, int32_t{0});
        ins.bind(b + 2, i / 64);
        ins.bind(b + 3, i % 64);
        ins.bindTextStatic(b + 4, events::toString(static_cast<events::ActionKind>(i % 8)));
        ins.bind(b + 5, (i % 64) / 2);
        ins.bindTextStatic(b + 6, "llm");
        ins.bind(b + 7, int32_t{0});
        ins.bindTextStatic(b + 8, "1");
        ins.bind(b + 9, int64_t{1000} * i);
        ins.bind(b + 10, int64_t{1000} * i + 700);
      }
      ins.run();
    }
    db.exec("COMMIT");
  }
  return {seconds(t0), processCpu() - cpu0};
}

struct WriterTiming {
  Timing total;
  double enqueue = 0;  // wall seconds until the last record was handed over
};

WriterTiming shardWriter(const std::string& path, int rank, int rows) {
  const double cpu0 = processCpu();
  const auto t0 = std::chrono::steady_clock::now();
  auto w = ShardWriter::open(path, events::RecordLevel::Stats, rank);
  for (int i = 0; i < rows; ++i) w->action(action(rank, i));
  const double enq = seconds(t0);
  w->close();
  return {{seconds(t0), processCpu() - cpu0}, enq};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string list(const std::vector<double>& v) {
  std::string s;
  char buf[32];
  for (double x : v) {
    std::snprintf(buf, sizeof buf, "%s%.3f", s.empty() ? "" : ", ", x);
    s += buf;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 2'000'000;
  const std::string dir = argc > 2 ? argv[2] : fs::temp_directory_path().string();
  const int reps = std::max(1, argc > 3 ? std::atoi(argv[3]) : 5);
  const std::string only = argc > 4 ? argv[4] : "";
  const std::string base = dir + "/bench_writer_" + std::to_string(::getpid());
  const std::string plainDb = base + ".plain.db", writerDb = base + ".single.shard";

  if (!only.empty()) {
    const Timing t = only == "plain"     ? plainLoop(plainDb, rows, 1)
                     : only == "plain16" ? plainLoop(plainDb, rows, 16)
                                         : shardWriter(writerDb, 0, rows).total;
    std::printf("%s: %d rows in %.3f s, %.3f CPU s\n", only.c_str(), rows, t.wall, t.cpu);
    removeDb(plainDb);
    removeDb(writerDb);
    return 0;
  }

  // Each repetition runs the three in a rotating order.
  std::vector<double> plainWall, plainCpu, sameWall, sameCpu, writerWall, writerCpu, enqueue,
      ratios, sameRatios;
  for (int r = 0; r < reps; ++r) {
    Timing p, p16;
    WriterTiming w;
    std::string order;
    for (int k = 0; k < 3; ++k) {
      switch ((r + k) % 3) {
        case 0:
          p = plainLoop(plainDb, rows, 1);
          order += order.empty() ? "plain" : ", plain";
          break;
        case 1:
          p16 = plainLoop(plainDb, rows, 16);
          order += order.empty() ? "plain16" : ", plain16";
          break;
        default:
          w = shardWriter(writerDb, 0, rows);
          order += order.empty() ? "writer" : ", writer";
      }
      removeDb(plainDb);
      removeDb(writerDb);
    }
    plainWall.push_back(p.wall);
    plainCpu.push_back(p.cpu);
    sameWall.push_back(p16.wall);
    sameCpu.push_back(p16.cpu);
    writerWall.push_back(w.total.wall);
    writerCpu.push_back(w.total.cpu);
    enqueue.push_back(w.enqueue);
    ratios.push_back(p.wall / w.total.wall);
    sameRatios.push_back(p16.wall / w.total.wall);
    std::printf(
        "rep %d (%s): plain %.3f s (%.3f CPU s), plain16 %.3f s (%.3f CPU s), writer %.3f s "
        "(%.3f CPU s); ratio %.3f, to plain16 %.3f\n",
        r + 1, order.c_str(), p.wall, p.cpu, p16.wall, p16.cpu, w.total.wall, w.total.cpu,
        ratios.back(), sameRatios.back());
  }
  const double plain = median(plainWall), same = median(sameWall), writer = median(writerWall);
  std::printf(
      "plain prepared INSERT loop : %9d rows in %.3f s = %.2f M rows/s (median of %d; %.3f CPU "
      "s)\n",
      rows, plain, rows / plain / 1e6, reps, median(plainCpu));
  std::printf(
      "plain loop, 16 rows/INSERT : %9d rows in %.3f s = %.2f M rows/s (median of %d; %.3f CPU "
      "s)\n",
      rows, same, rows / same / 1e6, reps, median(sameCpu));
  std::printf(
      "ShardWriter (enqueue→close): %9d rows in %.3f s = %.2f M rows/s (enqueue alone %.2f M "
      "rows/s; %.3f CPU s); ratio to plain %.3f (median of reps %s); CPU ratio %.3f; ratio to "
      "plain16 %.3f (reps %s); CPU ratio to plain16 %.3f\n",
      rows, writer, rows / writer / 1e6, rows / median(enqueue) / 1e6, median(writerCpu),
      median(ratios), list(ratios).c_str(), median(plainCpu) / median(writerCpu),
      median(sameRatios), list(sameRatios).c_str(), median(sameCpu) / median(writerCpu));
  const std::string run = base + ".run.db";
  removeDb(run);
  events::RunInfo info;
  info.runId = "bench";
  info.worldSize = 8;
  createRunFile(run, info);
  const int perShard = rows / 8;
  for (int r = 0; r < 8; ++r) shardWriter(shardPathFor(run, r), r, perShard);
  const MergeResult res = mergeShards(run, findShards(run));
  std::printf("merge 8 shards x %d rows    : %.3f s (%lld rows, %.2f M rows/s), ok=%d\n", perShard,
              res.seconds, static_cast<long long>(res.rows), res.rows / res.seconds / 1e6,
              res.ok() ? 1 : 0);
  const auto t0 = std::chrono::steady_clock::now();
  const model::RunModel m = loadRun(run);
  const double load = seconds(t0);
  std::printf("loadRun of the merged run  : %zu events in %.3f s = %.2f M events/s\n",
              m.eventCount(), load, m.eventCount() / load / 1e6);
  for (const auto& s : findShards(run)) removeDb(s);
  removeDb(run);

  // The GUI target: 1,000,000 mixed events (half actions, half transfers with stats).
  createRunFile(run, info);
  const int mixed = rows / 2 / 8;
  for (int r = 0; r < 8; ++r) {
    auto w = ShardWriter::open(shardPathFor(run, r), events::RecordLevel::Stats, r);
    for (int i = 0; i < mixed / 2; ++i) {
      w->action(action(r, i));
      events::TransferRecord t;
      t.rank = r;
      t.side = (i & 1) ? events::Side::Recv : events::Side::Send;
      t.srcRank = (i & 1) ? (r + 7) % 8 : r;
      t.dstRank = (i & 1) ? r : (r + 1) % 8;
      t.edge = "llm:pp" + std::to_string(t.srcRank) + "->pp" + std::to_string(t.dstRank);
      t.iteration = i / 64;
      t.microbatch = i % 64;
      t.shape = {4, 128, 1024};
      t.dtype = "bfloat16";
      t.bytes = 4 * 128 * 1024 * 2;
      t.checksum = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i);
      t.hasStats = true;
      t.stats = {-1, 1, 0, 3, 0, 0, 4 * 128 * 1024};
      t.startNs = 1000LL * i;
      t.endNs = t.startNs + 300;
      w->transfer(std::move(t));
    }
  }
  mergeShards(run, findShards(run));
  const auto t1 = std::chrono::steady_clock::now();
  const model::RunModel mm = loadRun(run);
  const double loadMixed = seconds(t1);
  std::printf("loadRun, actions+transfers : %zu events in %.3f s (%zu pairs)\n", mm.eventCount(),
              loadMixed, mm.pairs.size());
  for (const auto& s : findShards(run)) removeDb(s);
  removeDb(run);
  return 0;
}
