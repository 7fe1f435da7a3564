#include "storage/ShardWriter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <bit>
#include <chrono>
#include <span>
#include <stdexcept>

#include "storage/Schema.h"
#include "storage/Sqlite.h"

namespace stagescope::storage {

using events::RecordLevel;

namespace {

// Rows per multi-row INSERT: one sqlite3_step inserts this many rows, so SQLite's
// per-statement work (step, halt, reset, its allocations) is paid once per kRowsPerInsert
// rows instead of once per row.  16 took the CPU per row of the actions table by a third;
// more rows per statement gained little (bench_writer).
constexpr int kRowsPerInsert = 16;

// One table's INSERT, prepared for one row and for kRowsPerInsert rows.
struct TableInsert {
  Stmt one, many;
  int columns = 0;  // parameters per row
  TableInsert() = default;
  TableInsert(Db& db, const char* table) {
    const TableDef& def = tableDef(table);
    one = db.prepare(insertSql(def));
    many = db.prepare(insertSql(def, "INSERT", kRowsPerInsert));
    columns = dataColumnCount(def);
  }
};

// Binds one row's columns in declaration order, from parameter `next` on.
struct RowBinder {
  Stmt& s;
  int next;
  template <typename V>
  void put(V v) {
    s.bind(next++, v);
  }
  void text(std::string_view v) { s.bindTextStatic(next++, v); }
  void textCopy(std::string_view v) { s.bindText(next++, v); }  // for a text made for the row
  void null() { s.bindNull(next++); }
  void real(double v) { bindReal(s, next++, v); }
  void blob(const std::vector<uint8_t>& p) { s.bindBlobStatic(next++, p.data(), p.size()); }
};

// The text of an integer list (shape, peers) as the shard stores it ("4,128,1024"), formatted
// only when it differs from the list this holder formatted last: consecutive rows mostly
// repeat it.  The text stays valid until the next call.
class ListText {
 public:
  template <typename List>
  std::string_view of(const List& list) {
    if (valid_ && std::equal(list.begin(), list.end(), key_.begin(), key_.end())) return text_;
    key_.assign(list.begin(), list.end());
    text_.clear();
    appendList(text_, list);
    valid_ = true;
    return text_;
  }

 private:
  std::vector<int64_t> key_;
  std::string text_;
  bool valid_ = false;
};

}  // namespace

// The writer thread's connection, prepared statements and list texts.  Statements are
// prepared once; rows are bound, kRowsPerInsert to a statement, then step/reset; text is
// bound without copying (the records and list texts outlive the step).
struct ShardWriter::Impl {
  Db db;
  Stmt begin, commit;
  TableInsert ranks, planned, actions, transfers, gradients, losses, inputs, diagnoses, collectives,
      messageRoles, waits, injectedFaults, referenceLosses, referenceGradients, moduleSteps,
      batchMembers;
  // Two list texts per row of a multi-row statement: they must all stay valid until its step.
  ListText lists[kRowsPerInsert][2];
  RecordLevel level;

  Impl(Db d, RecordLevel lvl) : db(std::move(d)), level(lvl) {
    begin = db.prepare("BEGIN IMMEDIATE");
    commit = db.prepare("COMMIT");
    ranks = TableInsert(db, "ranks");
    planned = TableInsert(db, "plan");
    actions = TableInsert(db, "actions");
    transfers = TableInsert(db, "transfers");
    gradients = TableInsert(db, "gradients");
    losses = TableInsert(db, "losses");
    inputs = TableInsert(db, "inputs");
    diagnoses = TableInsert(db, "diagnoses");
    collectives = TableInsert(db, "collectives");
    messageRoles = TableInsert(db, "message_roles");
    waits = TableInsert(db, "waits");
    injectedFaults = TableInsert(db, "injected_faults");
    batchMembers = TableInsert(db, "p2p_batches");
    referenceLosses = TableInsert(db, "reference_losses");
    referenceGradients = TableInsert(db, "reference_gradients");
    moduleSteps = TableInsert(db, "module_steps");
  }

  bool keepStats() const { return level >= RecordLevel::Stats; }
  bool keepPayload() const { return level >= RecordLevel::Full; }

  // Inserts `rows` in order: kRowsPerInsert per statement, the rest one by one.
  // bind(RowBinder&, slot, record) binds one record; slot < kRowsPerInsert is its place in the
  // statement (which list texts it may use).
  template <typename T, typename Bind>
  void insertAll(TableInsert& t, const RecordList<T>& rows, Bind bind) {
    static_assert(RecordList<T>::kChunk % kRowsPerInsert == 0);
    rows.forEachChunk([&](std::span<const T> chunk) {
      const size_t n = chunk.size();
      size_t i = 0;
      for (; i + kRowsPerInsert <= n; i += kRowsPerInsert) {
        for (int k = 0; k < kRowsPerInsert; ++k) {
          RowBinder b{t.many, k * t.columns + 1};
          bind(b, k, chunk[i + k]);
        }
        t.many.run();
      }
      for (; i < n; ++i) {
        RowBinder b{t.one, 1};
        bind(b, 0, chunk[i]);
        t.one.run();
      }
    });
  }

  void checksum(RowBinder& b, uint64_t checksum) {
    if (keepStats() && checksum != 0)
      b.put(std::bit_cast<int64_t>(checksum));
    else
      b.null();
  }
  // The 7 stat_* columns.
  void stats(RowBinder& b, bool has, const events::TensorStats& st) {
    if (!has || !keepStats()) {
      for (int k = 0; k < 7; ++k) b.null();
      return;
    }
    b.real(st.min);
    b.real(st.max);
    b.real(st.mean);
    b.real(st.l2);
    b.put(st.nanCount);
    b.put(st.infCount);
    b.put(st.numel);
  }
  void payload(RowBinder& b, const std::vector<uint8_t>& p) {
    if (keepPayload() && !p.empty())
      b.blob(p);
    else
      b.null();
  }
  void norm(RowBinder& b, double n) {
    if (keepStats())
      b.real(n);
    else
      b.null();
  }

  void bindRank(RowBinder& b, const events::RankInfo& r) {
    b.put(r.rank);
    b.text(r.module);
    b.put(r.tp);
    b.put(r.cp);
    b.put(r.pp);
    b.put(r.dp);
    b.put(r.globalStage);
    b.put(r.totalStages);
    b.put(r.warmup);
    b.text(r.host);
    b.text(r.device);
    b.put(r.pid);
    b.put(r.clockOffsetNs);
    if (r.clockOffsetUncertaintyNs >= 0)
      b.put(r.clockOffsetUncertaintyNs);
    else
      b.null();
  }
  void bindAction(RowBinder& b, int slot, const events::ActionRecord& a, bool withTimes) {
    b.put(a.rank);
    b.put(a.iteration);
    b.put(a.seq);
    b.text(events::toString(a.kind));
    b.put(a.microbatch);
    b.text(a.module);
    b.put(a.stage);
    b.text(lists[slot][0].of(a.peers));
    if (withTimes) {
      b.put(a.startNs);
      b.put(a.endNs);
    }
  }
  void bindTransfer(RowBinder& b, int slot, const events::TransferRecord& t) {
    b.put(t.rank);
    b.text(events::toString(t.side));
    b.put(t.srcRank);
    b.put(t.dstRank);
    b.put(t.srcGroupRank);
    b.put(t.dstGroupRank);
    b.text(t.edge);
    b.text(events::toString(t.edgeKind));
    b.text(events::toString(t.role));
    b.text(events::toString(t.direction));
    b.put(t.iteration);
    b.put(t.microbatch);
    b.put(t.actionSeq);
    b.text(lists[slot][0].of(t.shape));
    b.text(t.dtype);
    b.put(t.bytes);
    checksum(b, t.checksum);
    stats(b, t.hasStats, t.stats);
    b.put(t.startNs);
    b.put(t.endNs);
    payload(b, t.payload);
  }
  void bindGradient(RowBinder& b, int slot, const events::GradientRecord& g) {
    b.put(g.rank);
    b.put(g.iteration);
    b.put(g.microbatch);
    b.text(events::toString(g.phase));
    b.text(g.param);
    b.text(g.module);
    b.put(g.tp);
    b.put(g.pp);
    b.put(g.dp);
    b.put(g.partitionDim);
    b.put(g.partitionOffset);
    b.text(lists[slot][0].of(g.shape));
    b.text(lists[slot][1].of(g.fullShape));
    b.text(g.dtype);
    norm(b, g.norm);
    checksum(b, g.checksum);
    stats(b, g.hasStats, g.stats);
    payload(b, g.payload);
  }
  void bindLoss(RowBinder& b, const events::LossRecord& l) {
    b.put(l.rank);
    b.put(l.iteration);
    b.put(l.microbatch);
    b.put(l.dp);
    b.real(l.loss);
  }
  void bindReferenceLoss(RowBinder& b, const events::LossRecord& l) {
    b.put(l.iteration);
    b.put(l.microbatch);
    b.put(l.dp);
    b.real(l.loss);
  }
  void bindReferenceGradient(RowBinder& b, int slot, const events::GradientRecord& g) {
    b.put(g.iteration);
    b.text(g.param);
    b.text(g.module);
    b.text(lists[slot][0].of(g.shape));
    b.text(g.dtype);
    norm(b, g.norm);
    checksum(b, g.checksum);
    stats(b, g.hasStats, g.stats);
    payload(b, g.payload);
  }
  void bindInjectedFault(RowBinder& b, const events::InjectedFaultRecord& f) {
    b.put(f.rank);
    b.put(f.iteration);
    b.put(f.actionSeq);
    b.put(f.peer);
    std::string kinds;
    for (const auto& k : f.kinds) kinds += (kinds.empty() ? "" : ",") + k;
    b.textCopy(kinds);
    b.real(f.delaySeconds);
    b.put(f.timeNs);
  }
  void bindWait(RowBinder& b, const events::WaitRecord& w) {
    b.put(w.rank);
    b.put(w.iteration);
    b.put(w.actionSeq);
    b.text(events::toString(w.action));
    b.put(w.microbatch);
    b.put(w.peer);
    b.text(events::toString(w.op));
    b.text(w.edge);
    b.text(events::toString(w.direction));
    b.real(w.timeoutSeconds);
    b.text(w.error);
    b.put(w.timeNs);
  }
  void bindInput(RowBinder& b, int slot, const events::InputRecord& in) {
    b.put(in.rank);
    b.put(in.iteration);
    b.put(in.microbatch);
    b.text(in.module);
    b.text(in.name);
    b.text(lists[slot][0].of(in.shape));
    b.text(in.dtype);
    payload(b, in.payload);
  }
  void bindDiagnosis(RowBinder& b, const events::DiagnosisRecord& d) {
    b.put(d.rank);
    // A view of text that outlives the step (the bind does not copy): never a temporary.
    b.text(d.kind == events::DiagnosisKind::Other ? std::string_view(d.otherKind)
                                                  : std::string_view(events::toString(d.kind)));
    b.put(d.iteration);
    b.put(d.actionSeq);
    b.put(d.waitsOnRank);
    b.text(d.message);
    b.put(d.timeNs);
    b.put(d.signal);
  }
  void bindCollective(RowBinder& b, int slot, const events::CollectiveRecord& c) {
    b.put(c.rank);
    b.put(c.iteration);
    b.put(c.seq);
    b.put(c.groupSeq);
    b.text(c.op);
    b.text(c.group);
    b.put(c.groupRank);
    b.put(c.groupSize);
    b.text(lists[slot][0].of(c.groupRanks));
    b.put(c.root);
    b.text(c.reduceOp);
    b.text(lists[slot][1].of(c.shape));
    b.text(c.dtype);
    b.put(c.bytes);
    checksum(b, c.inChecksum);
    checksum(b, c.outChecksum);
    stats(b, c.hasStats, c.stats);
    b.put(c.startNs);
    b.put(c.endNs);
    b.text(c.state);
    payload(b, c.payload);
  }

  void bindMessageRole(RowBinder& b, const events::MessageRoleRecord& r) {
    b.put(r.rank);
    b.put(r.iteration);
    b.put(r.actionSeq);
    b.text(events::toString(r.side));
    b.text(events::toString(r.carries));
    b.text(r.peerIsNext ? std::string_view("next") : std::string_view("previous"));
    b.text(r.call);
  }

  void bindModuleStep(RowBinder& b, const events::ModuleStepRecord& m) {
    b.put(m.rank);
    b.put(m.iteration);
    b.text(m.module);
    b.put(m.dp);
    if (m.hasReduction()) {
      b.text(events::toString(m.normalisation));
      b.put(m.microbatches);
      b.put(m.tokens);
      b.put(m.globalTokens);
    } else {
      for (int i = 0; i < 4; ++i) b.null();
    }
    // A scale that was not recorded is NULL; a recorded non-finite one is stored as such.
    for (double v : {m.lossScale, m.lossScaleAfter}) {
      if (m.hasLossScale())
        b.real(v);
      else
        b.null();
    }
    for (int8_t v : {m.foundInf, m.skipped}) {
      if (v < 0)
        b.null();
      else
        b.put(static_cast<int32_t>(v));
    }
  }

  // Writes one batch in one transaction.
  void write(const Batch& batch) {
    begin.run();
    try {
      for (const auto& r : batch.runs) writeRunInfo(db, r);
      for (int32_t r : batch.replacedRanks)
        db.exec("DELETE FROM ranks WHERE rank = " + std::to_string(r));
      insertAll(ranks, batch.ranks, [&](RowBinder& b, int, const auto& r) { bindRank(b, r); });
      insertAll(planned, batch.planned,
                [&](RowBinder& b, int k, const auto& a) { bindAction(b, k, a, false); });
      insertAll(actions, batch.actions,
                [&](RowBinder& b, int k, const auto& a) { bindAction(b, k, a, true); });
      insertAll(transfers, batch.transfers,
                [&](RowBinder& b, int k, const auto& t) { bindTransfer(b, k, t); });
      insertAll(gradients, batch.gradients,
                [&](RowBinder& b, int k, const auto& g) { bindGradient(b, k, g); });
      insertAll(losses, batch.losses, [&](RowBinder& b, int, const auto& l) { bindLoss(b, l); });
      insertAll(inputs, batch.inputs,
                [&](RowBinder& b, int k, const auto& in) { bindInput(b, k, in); });
      insertAll(diagnoses, batch.diagnoses,
                [&](RowBinder& b, int, const auto& d) { bindDiagnosis(b, d); });
      insertAll(collectives, batch.collectives,
                [&](RowBinder& b, int k, const auto& c) { bindCollective(b, k, c); });
      insertAll(messageRoles, batch.messageRoles,
                [&](RowBinder& b, int, const auto& r) { bindMessageRole(b, r); });
      insertAll(waits, batch.waits, [&](RowBinder& b, int, const auto& w) { bindWait(b, w); });
      insertAll(injectedFaults, batch.injectedFaults,
                [&](RowBinder& b, int, const auto& f) { bindInjectedFault(b, f); });
      insertAll(moduleSteps, batch.moduleSteps,
                [&](RowBinder& b, int, const auto& m) { bindModuleStep(b, m); });
      insertAll(batchMembers, batch.batchMembers, [&](RowBinder& b, int k, const auto& m) {
        b.put(m.rank);
        b.put(m.iteration);
        b.put(m.seq);
        b.put(m.batch);
        b.text(lists[k][0].of(m.groupRanks));
      });
      insertAll(referenceLosses, batch.referenceLosses,
                [&](RowBinder& b, int, const auto& l) { bindReferenceLoss(b, l); });
      insertAll(referenceGradients, batch.referenceGradients,
                [&](RowBinder& b, int k, const auto& g) { bindReferenceGradient(b, k, g); });
      commit.run();
    } catch (...) {
      sqlite3_exec(db.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
};

void ShardWriter::Batch::clear() {
  runs.clear();
  replacedRanks.clear();
  ranks.clear();
  planned.clear();
  actions.clear();
  transfers.clear();
  gradients.clear();
  losses.clear();
  inputs.clear();
  diagnoses.clear();
  collectives.clear();
  messageRoles.clear();
  moduleSteps.clear();
  waits.clear();
  injectedFaults.clear();
  batchMembers.clear();
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

template <typename List, typename T>
void ShardWriter::enqueue(List Batch::*list, T&& record, size_t payloadBytes) {
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
void ShardWriter::replaceRanks(int32_t who, std::vector<events::RankInfo> rows) {
  if (level_ == RecordLevel::Off) return;
  flush();  // the rows replaced are committed, never in the batch that deletes them
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    pending_.replacedRanks.push_back(who);
  }
  for (auto& r : rows) rank(std::move(r));
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
void ShardWriter::messageRole(events::MessageRoleRecord r) {
  enqueue(&Batch::messageRoles, std::move(r), 0);
}
void ShardWriter::moduleStep(events::ModuleStepRecord s) {
  enqueue(&Batch::moduleSteps, std::move(s), 0);
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
void ShardWriter::batchMember(events::BatchMemberRecord b) {
  enqueue(&Batch::batchMembers, std::move(b), 0);
}
void ShardWriter::wait(events::WaitRecord w) {
  enqueue(&Batch::waits, std::move(w), 0);
}
void ShardWriter::injectedFault(events::InjectedFaultRecord f) {
  enqueue(&Batch::injectedFaults, std::move(f), 0);
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
