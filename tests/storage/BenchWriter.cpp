// bench_writer: throughput of the storage layer (not a test).
//
// Prints, in one process: rows/s of a plain prepared-INSERT loop into a table shaped like
// `actions` (the floor SQLite sets), rows/s of ShardWriter for the same rows (enqueue on this
// thread, writer thread to durable close), the time to merge 8 shards, and the time to load
// the merged run.  Usage: bench_writer [rows=2000000] [dir=/tmp]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

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

// The floor: one prepared INSERT, bind/step/reset, 8192 rows per BEGIN IMMEDIATE transaction.
double plainLoop(const std::string& path, int rows) {
  removeDb(path);
  Db db(path, Db::Mode::Create);
  db.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
  createSchema(db, FileKind::Shard);
  Stmt ins = db.prepare(insertSql(tableDef("actions")));
  const auto t0 = std::chrono::steady_clock::now();
  db.exec("BEGIN IMMEDIATE");
  for (int i = 0; i < rows; ++i) {
    if (i % 8192 == 8191) db.exec("COMMIT; BEGIN IMMEDIATE");
    ins.bind(1, int32_t{0});
    ins.bind(2, i / 64);
    ins.bind(3, i % 64);
    ins.bindTextStatic(4, events::toString(static_cast<events::ActionKind>(i % 8)));
    ins.bind(5, (i % 64) / 2);
    ins.bindTextStatic(6, "llm");
    ins.bind(7, int32_t{0});
    ins.bindTextStatic(8, "1");
    ins.bind(9, int64_t{1000} * i);
    ins.bind(10, int64_t{1000} * i + 700);
    ins.run();
  }
  db.exec("COMMIT");
  return seconds(t0);
}

struct WriterTimes {
  double enqueue, total;
};

WriterTimes shardWriter(const std::string& path, int rank, int rows) {
  const auto t0 = std::chrono::steady_clock::now();
  auto w = ShardWriter::open(path, events::RecordLevel::Stats, rank);
  for (int i = 0; i < rows; ++i) w->action(action(rank, i));
  const double enq = seconds(t0);
  w->close();
  return {enq, seconds(t0)};
}

}  // namespace

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 2'000'000;
  const std::string dir = argc > 2 ? argv[2] : fs::temp_directory_path().string();
  const std::string base = dir + "/bench_writer_" + std::to_string(::getpid());

  const double plain = plainLoop(base + ".plain.db", rows);
  std::printf("plain prepared INSERT loop : %9d rows in %.3f s = %.2f M rows/s\n", rows, plain,
              rows / plain / 1e6);
  const auto w = shardWriter(base + ".single.shard", 0, rows);
  std::printf(
      "ShardWriter (enqueue→close): %9d rows in %.3f s = %.2f M rows/s "
      "(enqueue alone %.2f M rows/s); ratio to plain %.2f\n",
      rows, w.total, rows / w.total / 1e6, rows / w.enqueue / 1e6, plain / w.total);
  removeDb(base + ".plain.db");
  removeDb(base + ".single.shard");

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
  const RunModel m = loadRun(run);
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
  const RunModel mm = loadRun(run);
  const double loadMixed = seconds(t1);
  std::printf("loadRun, actions+transfers : %zu events in %.3f s (%zu pairs)\n", mm.eventCount(),
              loadMixed, mm.pairs.size());
  for (const auto& s : findShards(run)) removeDb(s);
  removeDb(run);
  return 0;
}
