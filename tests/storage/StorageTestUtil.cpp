#include "StorageTestUtil.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "storage/Schema.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

namespace stagescope::storage::test {
namespace fs = std::filesystem;

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = (fs::temp_directory_path() /
           ("stagescope_storage_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
              .string();
  fs::remove_all(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

events::RunInfo sampleRun(int worldSize, events::RecordLevel level) {
  events::RunInfo r;
  r.runId = "run-42";
  r.configText = "[run]\nseed = 7\n";
  r.configHash = "0123456789abcdef";
  r.worldSize = worldSize;
  r.iterations = 3;
  r.microbatches = 4;
  r.level = level;
  r.modules = {{"vision", "encoder", 1, 1, 1, 1, 0, 2, {"llm"}},
               {"llm", "llm", 2, 1, 2, 1, 1, 4, {}}};
  r.versionStagescope = "0.1.0";
  r.versionTorch = "2.11.0";
  r.versionSqlite = "3.40.1";
  r.compiler = "gcc 12";
  r.startUnixMs = 1700000000000;
  r.endUnixMs = 0;
  r.status = events::RunStatus::Running;
  r.statusReason = "";
  r.recordFilter = {{0, 2}, {"llm", "vision"}, {0, 1, 5}};
  auto& s = r.settings;  // every field distinct from its default
  s.recorded = true;
  s.seed = 9007199254740993;  // above 2^53: not rounded through a double
  s.microBatchSize = 3;
  s.dtype = events::Dtype::BFloat16;
  s.forwardOnly = true;
  s.lossScale = 1024;
  s.optimizer = {events::OptimizerKind::Adam, 0.05, 0.5, 0.8, 0.98, 1e-6, 0.01};
  s.modules = {{"vision", events::ModuleKind::Encoder, 2, 4, 8, 0, 0},
               {"llm", events::ModuleKind::Llm, 1, 0, 0, 8, 64}};
  return r;
}

events::RankInfo sampleRank(int rank) {
  events::RankInfo r;
  r.rank = rank;
  r.module = rank == 0 ? "vision" : "llm";
  r.tp = rank % 2;
  r.cp = 0;
  r.pp = rank / 2;
  r.dp = 0;
  r.globalStage = rank;
  r.totalStages = 3;
  r.warmup = 2 - rank % 3;
  r.host = "host" + std::to_string(rank);
  r.device = "cpu";
  r.pid = 1000 + rank;
  r.clockOffsetNs = 0;
  return r;
}

events::ActionRecord sampleAction(int rank, int iteration, int seq) {
  events::ActionRecord a;
  a.rank = rank;
  a.iteration = iteration;
  a.seq = seq;
  a.kind = static_cast<events::ActionKind>(seq % static_cast<int>(events::ActionKind::Count));
  a.microbatch = (seq / 2) % 1024;  // a real plan has at most 65536 (core/events/Limits.h)
  a.module = "llm";
  a.stage = rank;
  a.peers = {rank + 1, rank + 3};
  a.startNs = 1'000'000LL * iteration + 1000 * seq;
  a.endNs = a.startNs + 500;
  return a;
}

events::TransferRecord sampleTransfer(events::Side side, int src, int dst, int iteration,
                                      int microbatch, const std::string& edge) {
  events::TransferRecord t;
  t.side = side;
  t.rank = side == events::Side::Send ? src : dst;
  t.srcRank = src;
  t.dstRank = dst;
  t.srcGroupRank = 0;
  t.dstGroupRank = 1;
  t.edge = edge;
  t.edgeKind = events::EdgeKind::Bridge;
  t.role = events::BridgeRole::FanIn;
  t.direction = events::Direction::Gradient;
  t.iteration = iteration;
  t.microbatch = microbatch;
  t.actionSeq = 5;
  t.shape = {4, 2, 32};
  t.dtype = "float32";
  t.bytes = 4 * 2 * 32 * 4;
  t.checksum = 0xfedcba9876543210ULL;  // high bit set: exercises the int64 bit pattern
  t.hasStats = true;
  t.stats = {-1.5, 2.5, 0.25, 7.0, 1, 2, 256};
  t.startNs = 100 + microbatch;
  t.endNs = 200 + microbatch;
  // The tensor's 4*2*32 float32 values' bytes (a payload holds exactly numel x 4 bytes):
  // 1, 2, 3, 0, 255, then 0, 1, 2, ...
  t.payload = {1, 2, 3, 0, 255};
  for (size_t i = t.payload.size(); i < static_cast<size_t>(t.bytes); ++i)
    t.payload.push_back(static_cast<uint8_t>(i));
  return t;
}

events::GradientRecord sampleGradient(int rank, int iteration) {
  events::GradientRecord g;
  g.rank = rank;
  g.iteration = iteration;
  g.microbatch = 2;
  g.phase = events::GradPhase::Accumulated;
  g.param = "llm.layers.3.attn.q.weight";
  g.module = "llm";
  g.tp = 1;
  g.pp = 2;
  g.dp = 0;
  g.partitionDim = 0;
  g.partitionOffset = 16;
  g.shape = {16, 32};
  g.fullShape = {32, 32};
  g.dtype = "float32";
  g.norm = 3.25;
  g.checksum = 0x8000000000000001ULL;
  g.hasStats = true;
  g.stats = {-0.5, 0.5, 0.0, 3.25, 0, 0, 512};
  g.payload = std::vector<uint8_t>(16 * 32 * 4, 7);  // the shard's float32 bytes
  return g;
}

events::LossRecord sampleLoss(int rank, int iteration, int microbatch) {
  return {rank, iteration, microbatch, 0, 2.5 + microbatch};
}

events::InputRecord sampleInput(int rank, int iteration, int microbatch) {
  events::InputRecord in;
  in.rank = rank;
  in.iteration = iteration;
  in.microbatch = microbatch;
  in.module = "llm";
  in.name = "tokens";
  in.shape = {2, 16};
  in.dtype = "int64";
  in.payload = std::vector<uint8_t>(256, 3);
  return in;
}

events::DiagnosisRecord sampleDiagnosis(int rank) {
  return {rank, events::DiagnosisKind::Hang, 1, 7, rank + 1, "rank waits for its peer", 123456, ""};
}

void writeActionsShard(const std::string& shardPath, int rank, int n) {
  auto w = ShardWriter::open(shardPath, events::RecordLevel::Stats, rank);
  w->rank(sampleRank(rank));
  for (int i = 0; i < n; ++i) w->action(sampleAction(rank, 0, i));
  w->close();
}

void execSql(const std::string& path, const std::string& sql) {
  Db db(path, Db::Mode::ReadWrite);
  db.exec(sql);
}

void writeText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Rewrites a format-3 run file in the format-2 layout: each packed table becomes a plain table
// with the logical columns (copied from its view), `texts` goes, user_version 2.
void rewriteAsFormat2(const std::string& path) {
  Db db(path, Db::Mode::ReadWrite);
  for (const char* name : {"plan", "actions", "transfers", "gradients"}) {
    const TableDef& t = tableDef(name);
    const std::string n = name;
    db.exec("CREATE TABLE " + n + "_v2 AS SELECT " +
            (n == "transfers" || n == "gradients" ? "id, " : "") + dataColumns(t) +
            ", shard_id FROM " + n + " ORDER BY id; DROP VIEW " + n + "; DROP TABLE " + n +
            "_rows; ALTER TABLE " + n + "_v2 RENAME TO " + n + ";");
  }
  db.exec("DROP TABLE texts; PRAGMA user_version = 2;");
}

}  // namespace stagescope::storage::test
