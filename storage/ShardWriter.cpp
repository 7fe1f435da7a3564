#include "storage/ShardWriter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <bit>
#include <chrono>
#include <stdexcept>

#include "storage/Schema.h"
#include "storage/Sqlite.h"

namespace stagescope::storage {

using events::RecordLevel;

// The writer thread's connection, prepared statements and scratch text buffers.  Statements
// are prepared once; every row is bind/step/reset, text bound without copying (the record
// outlives the step).
struct ShardWriter::Impl {
  Db db;
  Stmt begin, commit, ranks, planned, actions, transfers, gradients, losses, inputs, diagnoses,
      collectives, waits, referenceLosses, referenceGradients;
  std::string list1, list2;  // formatted shape / peers of the current row
  RecordLevel level;

  Impl(Db d, RecordLevel lvl) : db(std::move(d)), level(lvl) {
    begin = db.prepare("BEGIN IMMEDIATE");
    commit = db.prepare("COMMIT");
    ranks = db.prepare(insertSql(tableDef("ranks")));
    planned = db.prepare(insertSql(tableDef("plan")));
    actions = db.prepare(insertSql(tableDef("actions")));
    transfers = db.prepare(insertSql(tableDef("transfers")));
    gradients = db.prepare(insertSql(tableDef("gradients")));
    losses = db.prepare(insertSql(tableDef("losses")));
    inputs = db.prepare(insertSql(tableDef("inputs")));
    diagnoses = db.prepare(insertSql(tableDef("diagnoses")));
    collectives = db.prepare(insertSql(tableDef("collectives")));
    waits = db.prepare(insertSql(tableDef("waits")));
    referenceLosses = db.prepare(insertSql(tableDef("reference_losses")));
    referenceGradients = db.prepare(insertSql(tableDef("reference_gradients")));
  }

  bool keepStats() const { return level >= RecordLevel::Stats; }
  bool keepPayload() const { return level >= RecordLevel::Full; }

  void bindChecksum(Stmt& s, int i, uint64_t checksum) {
    if (keepStats() && checksum != 0)
      s.bind(i, std::bit_cast<int64_t>(checksum));
    else
      s.bindNull(i);
  }
  // Binds the 7 stat_* columns starting at i; returns the next index.
  int bindStats(Stmt& s, int i, bool has, const events::TensorStats& st) {
    if (!has || !keepStats()) {
      for (int k = 0; k < 7; ++k) s.bindNull(i + k);
      return i + 7;
    }
    bindReal(s, i++, st.min);
    bindReal(s, i++, st.max);
    bindReal(s, i++, st.mean);
    bindReal(s, i++, st.l2);
    s.bind(i++, st.nanCount);
    s.bind(i++, st.infCount);
    s.bind(i++, st.numel);
    return i;
  }
  void bindPayload(Stmt& s, int i, const std::vector<uint8_t>& p) {
    if (keepPayload() && !p.empty())
      s.bindBlobStatic(i, p.data(), p.size());
    else
      s.bindNull(i);
  }

  void write(const events::RankInfo& r) {
    Stmt& s = ranks;
    s.bind(1, r.rank);
    s.bindTextStatic(2, r.module);
    s.bind(3, r.tp);
    s.bind(4, r.cp);
    s.bind(5, r.pp);
    s.bind(6, r.dp);
    s.bind(7, r.globalStage);
    s.bind(8, r.totalStages);
    s.bind(9, r.warmup);
    s.bindTextStatic(10, r.host);
    s.bindTextStatic(11, r.device);
    s.bind(12, r.pid);
    s.bind(13, r.clockOffsetNs);
    if (r.clockOffsetUncertaintyNs >= 0)
      s.bind(14, r.clockOffsetUncertaintyNs);
    else
      s.bindNull(14);
    s.run();
  }
  void write(Stmt& s, const events::ActionRecord& a, bool withTimes) {
    list1.clear();
    appendList(list1, a.peers);
    s.bind(1, a.rank);
    s.bind(2, a.iteration);
    s.bind(3, a.seq);
    s.bindTextStatic(4, events::toString(a.kind));
    s.bind(5, a.microbatch);
    s.bindTextStatic(6, a.module);
    s.bind(7, a.stage);
    s.bindTextStatic(8, list1);
    if (withTimes) {
      s.bind(9, a.startNs);
      s.bind(10, a.endNs);
    }
    s.run();
  }
  void write(const events::TransferRecord& t) {
    Stmt& s = transfers;
    list1.clear();
    appendList(list1, t.shape);
    s.bind(1, t.rank);
    s.bindTextStatic(2, events::toString(t.side));
    s.bind(3, t.srcRank);
    s.bind(4, t.dstRank);
    s.bind(5, t.srcGroupRank);
    s.bind(6, t.dstGroupRank);
    s.bindTextStatic(7, t.edge);
    s.bindTextStatic(8, events::toString(t.edgeKind));
    s.bindTextStatic(9, events::toString(t.role));
    s.bindTextStatic(10, events::toString(t.direction));
    s.bind(11, t.iteration);
    s.bind(12, t.microbatch);
    s.bind(13, t.actionSeq);
    s.bindTextStatic(14, list1);
    s.bindTextStatic(15, t.dtype);
    s.bind(16, t.bytes);
    bindChecksum(s, 17, t.checksum);
    int i = bindStats(s, 18, t.hasStats, t.stats);
    s.bind(i++, t.startNs);
    s.bind(i++, t.endNs);
    bindPayload(s, i, t.payload);
    s.run();
  }
  void write(const events::GradientRecord& g) {
    Stmt& s = gradients;
    list1.clear();
    appendList(list1, g.shape);
    list2.clear();
    appendList(list2, g.fullShape);
    s.bind(1, g.rank);
    s.bind(2, g.iteration);
    s.bind(3, g.microbatch);
    s.bindTextStatic(4, events::toString(g.phase));
    s.bindTextStatic(5, g.param);
    s.bindTextStatic(6, g.module);
    s.bind(7, g.tp);
    s.bind(8, g.pp);
    s.bind(9, g.dp);
    s.bind(10, g.partitionDim);
    s.bind(11, g.partitionOffset);
    s.bindTextStatic(12, list1);
    s.bindTextStatic(13, list2);
    s.bindTextStatic(14, g.dtype);
    if (keepStats())
      bindReal(s, 15, g.norm);
    else
      s.bindNull(15);
    bindChecksum(s, 16, g.checksum);
    int i = bindStats(s, 17, g.hasStats, g.stats);
    bindPayload(s, i, g.payload);
    s.run();
  }
  void write(const events::LossRecord& l) {
    Stmt& s = losses;
    s.bind(1, l.rank);
    s.bind(2, l.iteration);
    s.bind(3, l.microbatch);
    s.bind(4, l.dp);
    bindReal(s, 5, l.loss);
    s.run();
  }
  void writeReference(const events::LossRecord& l) {
    Stmt& s = referenceLosses;
    s.bind(1, l.iteration);
    s.bind(2, l.microbatch);
    s.bind(3, l.dp);
    bindReal(s, 4, l.loss);
    s.run();
  }
  void writeReference(const events::GradientRecord& g) {
    Stmt& s = referenceGradients;
    list1.clear();
    appendList(list1, g.shape);
    s.bind(1, g.iteration);
    s.bindTextStatic(2, g.param);
    s.bindTextStatic(3, g.module);
    s.bindTextStatic(4, list1);
    s.bindTextStatic(5, g.dtype);
    if (keepStats())
      bindReal(s, 6, g.norm);
    else
      s.bindNull(6);
    bindChecksum(s, 7, g.checksum);
    int i = bindStats(s, 8, g.hasStats, g.stats);
    bindPayload(s, i, g.payload);
    s.run();
  }
  void write(const events::WaitRecord& w) {
    Stmt& s = waits;
    s.bind(1, w.rank);
    s.bind(2, w.iteration);
    s.bind(3, w.actionSeq);
    s.bindTextStatic(4, events::toString(w.action));
    s.bind(5, w.microbatch);
    s.bind(6, w.peer);
    s.bindTextStatic(7, events::toString(w.op));
    s.bindTextStatic(8, w.edge);
    s.bindTextStatic(9, events::toString(w.direction));
    bindReal(s, 10, w.timeoutSeconds);
    s.bindTextStatic(11, w.error);
    s.bind(12, w.timeNs);
    s.run();
  }
  void write(const events::InputRecord& in) {
    Stmt& s = inputs;
    list1.clear();
    appendList(list1, in.shape);
    s.bind(1, in.rank);
    s.bind(2, in.iteration);
    s.bind(3, in.microbatch);
    s.bindTextStatic(4, in.module);
    s.bindTextStatic(5, in.name);
    s.bindTextStatic(6, list1);
    s.bindTextStatic(7, in.dtype);
    bindPayload(s, 8, in.payload);
    s.run();
  }
  void write(const events::DiagnosisRecord& d) {
    Stmt& s = diagnoses;
    s.bind(1, d.rank);
    s.bindTextStatic(2, d.kind);
    s.bind(3, d.iteration);
    s.bind(4, d.actionSeq);
    s.bind(5, d.waitsOnRank);
    s.bindTextStatic(6, d.message);
    s.bind(7, d.timeNs);
    s.run();
  }

  void write(const events::CollectiveRecord& c) {
    Stmt& s = collectives;
    list1.clear();
    appendList(list1, c.groupRanks);
    list2.clear();
    appendList(list2, c.shape);
    s.bind(1, c.rank);
    s.bind(2, c.iteration);
    s.bind(3, c.seq);
    s.bind(4, c.groupSeq);
    s.bindTextStatic(5, c.op);
    s.bindTextStatic(6, c.group);
    s.bind(7, c.groupRank);
    s.bind(8, c.groupSize);
    s.bindTextStatic(9, list1);
    s.bind(10, c.root);
    s.bindTextStatic(11, c.reduceOp);
    s.bindTextStatic(12, list2);
    s.bindTextStatic(13, c.dtype);
    s.bind(14, c.bytes);
    bindChecksum(s, 15, c.inChecksum);
    bindChecksum(s, 16, c.outChecksum);
    int i = bindStats(s, 17, c.hasStats, c.stats);
    s.bind(i++, c.startNs);
    s.bind(i++, c.endNs);
    s.bindTextStatic(i++, c.state);
    bindPayload(s, i, c.payload);
    s.run();
  }

  // Writes one batch in one transaction.
  void write(const Batch& b) {
    begin.run();
    try {
      for (const auto& r : b.runs) writeRunInfo(db, r);
      for (const auto& r : b.ranks) write(r);
      for (const auto& a : b.planned) write(planned, a, false);
      for (const auto& a : b.actions) write(actions, a, true);
      for (const auto& t : b.transfers) write(t);
      for (const auto& g : b.gradients) write(g);
      for (const auto& l : b.losses) write(l);
      for (const auto& in : b.inputs) write(in);
      for (const auto& d : b.diagnoses) write(d);
      for (const auto& c : b.collectives) write(c);
      for (const auto& w : b.waits) write(w);
      for (const auto& l : b.referenceLosses) writeReference(l);
      for (const auto& g : b.referenceGradients) writeReference(g);
      commit.run();
    } catch (...) {
      sqlite3_exec(db.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
};

void ShardWriter::Batch::clear() {
  runs.clear();
  ranks.clear();
  planned.clear();
  actions.clear();
  transfers.clear();
  gradients.clear();
  losses.clear();
  inputs.clear();
  diagnoses.clear();
  collectives.clear();
  waits.clear();
  referenceLosses.clear();
  referenceGradients.clear();
  rows = 0;
  bytes = 0;
}

namespace {
int64_t nowUnixMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}
}  // namespace

ShardWriter::ShardWriter(std::string path, RecordLevel level, ShardWriterOptions opts)
    : path_(std::move(path)), level_(level), opts_(opts) {}

std::unique_ptr<ShardWriter> ShardWriter::open(const std::string& shardPath, RecordLevel level,
                                               int rank, ShardWriterOptions opts) {
  if (opts.replaceExisting) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      ::unlink((shardPath + suffix).c_str());  // files only; a directory stays and fails below
  } else {
    // Sidecars first: SQLite would apply or delete a -wal/-journal left next to a new shard.
    for (const char* suffix : {"-wal", "-shm", "-journal"}) {
      struct stat st;
      if (::lstat((shardPath + suffix).c_str(), &st) == 0) {
        throw ShardExists(shardPath + suffix, shardPath + suffix + ": exists");
      }
    }
    // Exclusive creation: of two writers of one path, exactly one gets it.
    const int fd = ::open(shardPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) throw ShardExists(shardPath, shardPath + ": exists");
    if (fd >= 0) ::close(fd);  // an empty file: SQLite starts a new database in it
  }
  Db db(shardPath, Db::Mode::Create);
  db.setBusyTimeout(opts.busyTimeoutMs);
  db.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-16384;");
  createSchema(db, FileKind::Shard);
  {
    Stmt w = db.prepare("INSERT INTO writer(rank, level, pid, opened_unix_ms) VALUES(?,?,?,?)");
    w.bind(1, int32_t{rank});
    w.bindText(2, events::toString(level));
    w.bind(3, int64_t{::getpid()});
    w.bind(4, nowUnixMs());
    w.run();
  }
  std::unique_ptr<ShardWriter> writer(new ShardWriter(shardPath, level, opts));
  writer->impl_ = std::make_unique<Impl>(std::move(db), level);
  if (level != RecordLevel::Off) writer->thread_ = std::thread([w = writer.get()] { w->loop(); });
  return writer;
}

ShardWriter::~ShardWriter() {
  close();
}

template <typename T>
void ShardWriter::enqueue(std::vector<T> Batch::*list, T&& record, size_t payloadBytes) {
  if (level_ == RecordLevel::Off) return;
  std::unique_lock lock(mu_);
  if (closed_) return;
  if (pending_.rows >= opts_.maxPendingRows || pending_.bytes >= opts_.maxPendingBytes) {
    wake_.notify_one();
    done_.wait(lock, [&] {
      return stop_ || !error_.empty() ||
             (pending_.rows < opts_.maxPendingRows && pending_.bytes < opts_.maxPendingBytes);
    });
  }
  (pending_.*list).push_back(std::move(record));
  ++enqueued_;
  pending_.bytes += payloadBytes;
  if (++pending_.rows == opts_.batchRows) wake_.notify_one();
}

void ShardWriter::run(events::RunInfo info) {
  enqueue(&Batch::runs, std::move(info), 0);
}
void ShardWriter::rank(events::RankInfo info) {
  enqueue(&Batch::ranks, std::move(info), 0);
}
void ShardWriter::planned(events::ActionRecord a) {
  enqueue(&Batch::planned, std::move(a), 0);
}
void ShardWriter::action(events::ActionRecord a) {
  enqueue(&Batch::actions, std::move(a), 0);
}
void ShardWriter::collective(events::CollectiveRecord c) {
  size_t n = c.payload.size();
  enqueue(&Batch::collectives, std::move(c), n);
}
void ShardWriter::transfer(events::TransferRecord t) {
  size_t n = t.payload.size();
  enqueue(&Batch::transfers, std::move(t), n);
}
void ShardWriter::gradient(events::GradientRecord g) {
  size_t n = g.payload.size();
  enqueue(&Batch::gradients, std::move(g), n);
}
void ShardWriter::loss(events::LossRecord l) {
  enqueue(&Batch::losses, std::move(l), 0);
}
void ShardWriter::input(events::InputRecord in) {
  size_t n = in.payload.size();
  enqueue(&Batch::inputs, std::move(in), n);
}
void ShardWriter::diagnosis(events::DiagnosisRecord d) {
  enqueue(&Batch::diagnoses, std::move(d), 0);
}
void ShardWriter::wait(events::WaitRecord w) {
  enqueue(&Batch::waits, std::move(w), 0);
}
void ShardWriter::referenceLoss(events::LossRecord l) {
  enqueue(&Batch::referenceLosses, std::move(l), 0);
}
void ShardWriter::referenceGradient(events::GradientRecord g) {
  size_t n = g.payload.size();
  enqueue(&Batch::referenceGradients, std::move(g), n);
}

void ShardWriter::loop() {
  Batch work;
  std::unique_lock lock(mu_);
  const auto interval = std::chrono::milliseconds(opts_.commitIntervalMs);
  while (true) {
    wake_.wait_for(lock, interval,
                   [&] { return stop_ || flushWanted_ || pending_.rows >= opts_.batchRows; });
    if (pending_.rows == 0) {
      committed_ = enqueued_;
      flushWanted_ = false;
      done_.notify_all();
      if (stop_) break;
      continue;
    }
    std::swap(work, pending_);
    const uint64_t upto = enqueued_;
    flushWanted_ = false;
    const bool failed = !error_.empty();
    lock.unlock();
    done_.notify_all();  // space is free again
    std::string err;
    if (!failed) {
      try {
        impl_->write(work);
      } catch (const std::exception& e) {
        err = e.what();
      }
    }
    work.clear();  // records are destroyed here, off the recording thread
    lock.lock();
    if (!err.empty() && error_.empty()) error_ = err;
    committed_ = upto;
    done_.notify_all();
  }
}

void ShardWriter::flush() {
  if (level_ == RecordLevel::Off) return;
  std::unique_lock lock(mu_);
  const uint64_t target = enqueued_;
  if (committed_ < target && thread_.joinable() && !stop_) {
    flushWanted_ = true;
    wake_.notify_one();
    done_.wait(lock, [&] { return committed_ >= target || stop_; });
  }
  if (!error_.empty()) throw std::runtime_error(path_ + ": shard writer failed: " + error_);
}

void ShardWriter::close() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  if (impl_) {
    sqlite3_exec(impl_->db.handle(), "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
    impl_.reset();  // finalizes statements, closes the connection
  }
}

std::string ShardWriter::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

uint64_t ShardWriter::committedRecords() const {
  std::lock_guard lock(mu_);
  return committed_;
}

}  // namespace stagescope::storage
