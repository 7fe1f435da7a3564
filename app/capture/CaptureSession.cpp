#include "app/capture/CaptureSession.h"

#include <torch/version.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "app/capture/AbortHook.h"
#include "app/capture/DigestWorker.h"
#include "core/engine/BackendError.h"
#include "core/engine/Clock.h"
#include "core/events/CapturedLayout.h"
#include "core/events/DiagnosisKind.h"
#include "core/events/Printable.h"
#include "core/plan/Config.h"
#include "core/plan/Plan.h"
#include "core/plan/RunLayout.h"
#include "core/plan/Topology.h"
#include "storage/Merge.h"
#include "storage/Schema.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"

namespace stagescope::capture {

using events::RecordLevel;
using events::RunStatus;

namespace {
int64_t unixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}
}  // namespace

std::string runIdFromEnvironment() {
  for (const char* name : {"STAGESCOPE_RUN_ID", "TORCHELASTIC_RUN_ID"}) {
    if (const char* id = std::getenv(name); id && *id) return id;
  }
  return "";
}

std::chrono::milliseconds parseHangTimeout(const std::string& text, const std::string& what) {
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || *end != '\0' || !std::isfinite(seconds) ||
      seconds <= 0 || seconds > 1e6) {
    throw std::invalid_argument(what + "='" + text +
                                "': expected a number of seconds > 0 (e.g. 30 or 2.5)");
  }
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(seconds * 1000)));
}

CaptureConfig configFromEnvironment(bool* ok) {
  CaptureConfig cfg;
  const char* run = std::getenv("STAGESCOPE_RUN");
  *ok = run != nullptr && *run != '\0';
  if (*ok) cfg.runPath = run;
  if (const char* level = std::getenv("STAGESCOPE_LEVEL"); level && *level) {
    if (!events::parseRecordLevel(level, &cfg.level)) {
      throw std::invalid_argument(std::string("STAGESCOPE_LEVEL='") + level +
                                  "': expected one of off, meta, stats, full");
    }
  }
  if (const char* t = std::getenv("STAGESCOPE_HANG_TIMEOUT"); t && *t) {
    cfg.hangTimeout = parseHangTimeout(t, "STAGESCOPE_HANG_TIMEOUT");
  }
  cfg.runId = runIdFromEnvironment();
  return cfg;
}

CaptureSession& CaptureSession::instance() {
  // Never destroyed: backends (owned by Python objects) may outlive static destruction.
  static auto* session = new CaptureSession();
  return *session;
}

CaptureSession::~CaptureSession() = default;

void CaptureSession::configure(CaptureConfig cfg) {
  std::lock_guard lock(mu_);
  if (writer_) {
    throw std::logic_error("stagescope_torch.configure(): recording already started into '" +
                           cfg_.runPath + "' (configure before init_process_group)");
  }
  cfg_ = std::move(cfg);
  configured_ = true;
}

bool CaptureSession::configured() const {
  std::lock_guard lock(mu_);
  return configured_;
}

void CaptureSession::start(int globalRank, int worldSize) {
  std::lock_guard lock(mu_);
  if (writer_) {
    if (globalRank != rank_) {
      throw std::logic_error("stagescope backend: this process records rank " +
                             std::to_string(rank_) + " but a group was created for rank " +
                             std::to_string(globalRank));
    }
    return;
  }
  if (!configured_) {
    bool ok = false;
    cfg_ = configFromEnvironment(&ok);
    if (!ok) {
      throw std::runtime_error(
          "stagescope backend: no run file to record into; set STAGESCOPE_RUN=<file.db> "
          "(and optionally STAGESCOPE_LEVEL=off|meta|stats|full) or call "
          "stagescope_torch.configure(run=...) before init_process_group");
    }
    configured_ = true;
  }
  if (cfg_.runId.empty()) cfg_.runId = runIdFromEnvironment();
  if (cfg_.runId.empty()) cfg_.runId = std::filesystem::path(cfg_.runPath).filename().string();
  rank_ = globalRank;
  worldSize_ = worldSize;
  startUnixMs_ = unixMs();
  // Rank 0 creates the run file (as stagescope's launcher does); it refuses to replace an
  // existing file, so a second job never overwrites a recorded run. It is created only once
  // the rank's own shard is open, so a refused shard leaves no empty `running` run file.
  if (globalRank == 0 && std::filesystem::exists(cfg_.runPath)) {
    throw std::runtime_error("stagescope backend: run file '" + cfg_.runPath +
                             "' already exists; choose a new STAGESCOPE_RUN (runs are never "
                             "overwritten)");
  }
  const std::string shard = cfg_.runPath + ".rank" + std::to_string(globalRank) + ".shard";
  // The shard is created, never replaced: a file at its path (an earlier job's shard, any
  // other file) stops this rank with one line and stays as it was (docs/commands.md "Output
  // files"; docs/capture.md "Python API").
  storage::ShardWriterOptions shardOptions;
  shardOptions.replaceExisting = false;
  try {
    auto writer = storage::ShardWriter::open(shard, cfg_.level, globalRank, shardOptions);
    shard_ = writer.get();
    writer_ = std::move(writer);
  } catch (const storage::ShardExists& e) {
    throw std::runtime_error("stagescope backend: rank " + std::to_string(globalRank) + ": " +
                             e.path() +
                             ": already exists (left by an earlier job?); the backend never "
                             "replaces a file it did not create: move it away, or choose a new "
                             "STAGESCOPE_RUN");
  }
  if (globalRank == 0) storage::createRunFile(cfg_.runPath, runInfo(RunStatus::Running, ""));
  for (auto& row : rankRows({})) writer_->rank(std::move(row));
  // Every shard names its run, so merge refuses a stale shard of another job.
  writer_->run(runInfo(RunStatus::Running, ""));
  watchdog_ = std::make_unique<HangWatchdog>(
      [this](events::WaitRecord w, const std::string& what, int64_t stuckNs) {
        stuck(std::move(w), what, stuckNs);
      });
  installAbortHook();
  if (globalRank == 0 && cfg_.level != RecordLevel::Off) {
    // The job announces that it is recorded, and where, once (rank 0).
    std::fprintf(stderr,
                 "stagescope: recording %d rank(s) at level %s into %s; after the job: "
                 "stagescope merge %s && stagescope check %s\n",
                 worldSize, events::toString(cfg_.level), cfg_.runPath.c_str(),
                 cfg_.runPath.c_str(), cfg_.runPath.c_str());
  }
}

HangWatchdog* CaptureSession::watchdog() {
  std::lock_guard lock(mu_);
  return finished_ ? nullptr : watchdog_.get();
}

std::chrono::milliseconds CaptureSession::hangTimeoutFor(
    std::chrono::milliseconds groupTimeout) const {
  std::lock_guard lock(mu_);
  if (cfg_.hangTimeout.count() > 0) return cfg_.hangTimeout;
  return groupTimeout.count() > 0 ? groupTimeout : std::chrono::milliseconds(30 * 60 * 1000);
}

void CaptureSession::stuck(events::WaitRecord w, const std::string& what, int64_t stuckNs) {
  char text[96];
  std::snprintf(text, sizeof text, "not complete after %.1f s (the hang timeout is %g s)",
                static_cast<double>(stuckNs) / 1e9, w.timeoutSeconds);
  w.error = text;
  events::DiagnosisRecord d;
  d.rank = rank_;
  d.kind = events::DiagnosisKind::Timeout;
  d.iteration = w.iteration;
  d.actionSeq = w.actionSeq;
  d.waitsOnRank = w.peer;
  d.message = what + ": " + text;
  d.timeNs = engine::nowNs();
  w.rank = rank_;
  w.timeNs = d.timeNs;
  DigestWorker::instance().drain();  // what completed before the hang goes into this flush
  std::lock_guard lock(mu_);
  ++stuckNow_;
  if (firstStuck_.empty()) firstStuck_ = d.message;
  if (!writer_ || finished_) return;
  writer_->wait(std::move(w));
  const std::string line = d.message;
  writer_->diagnosis(std::move(d));
  try {
    writer_->flush();
  } catch (const std::exception&) {
    // the writer keeps its error (see failure())
  }
  // Said while it happens, once per stuck operation: the job may wait for minutes more before
  // c10d's own timeout or its launcher stops it (docs/capture.md "Hangs").
  std::fprintf(stderr,
               "stagescope: rank %d is stuck: %s; recorded in %s.rank%d.shard; stop the job "
               "(Ctrl-C), then: stagescope merge %s && stagescope check %s\n",
               rank_, events::printableLine(line).c_str(), cfg_.runPath.c_str(), rank_,
               cfg_.runPath.c_str(), cfg_.runPath.c_str());
}

bool CaptureSession::started() const {
  std::lock_guard lock(mu_);
  return writer_ != nullptr;
}

RecordLevel CaptureSession::level() const {
  std::lock_guard lock(mu_);
  return writer_ ? cfg_.level : RecordLevel::Off;
}

events::Recorder& CaptureSession::recorder() {
  std::lock_guard lock(mu_);
  if (writer_ && !finished_) return *writer_;
  return null_;
}

events::RunInfo CaptureSession::runInfo(RunStatus status, const std::string& reason) const {
  events::RunInfo info;
  info.runId = cfg_.runId;
  // A captured job has no stagescope config; this text says what produced the file.
  info.configText = std::string(events::kCapturedConfigLine) + "\n" + declaredLayout_;
  const uint64_t hash = events::fnv1a64(info.configText);  // as for stagescope's own configs
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  info.configHash = hex;
  info.worldSize = worldSize_;
  info.iterations = maxIteration_ + 1;
  info.microbatches = declaredMicrobatches_;
  info.level = cfg_.level;
  info.origin = events::RunOrigin::Captured;
  info.jobSchedule = declaredSchedule_;
  info.modules = declaredModules_;
  if (info.modules.empty()) {
    events::ModuleInfo job;
    job.name = "job";
    job.kind = "captured";
    job.pp = worldSize_;
    info.modules.push_back(job);
  }
  info.versionStagescope = "0.1.0";
  info.versionTorch = TORCH_VERSION;
  info.compiler = std::string("g++ ") + __VERSION__;
  info.startUnixMs = startUnixMs_;
  info.endUnixMs = status == RunStatus::Running ? 0 : unixMs();
  info.status = status;
  info.statusReason = reason;
  return info;
}

namespace {
// The layout `text` declares, checked against the job's world: its modules and this rank's
// `ranks` rows (the job's own stage and warmup where its "# job schedule:" line gives them).
struct DeclaredLayout {
  std::vector<events::ModuleInfo> modules;
  std::vector<events::RankInfo> rows;
  std::vector<events::JobStage> schedule;  // every rank's "# job schedule:" line, as declared
  int microbatches = 0;
};
DeclaredLayout parseDeclared(const std::string& text, int rank, int worldSize) {
  plan::RunConfig cfg;
  try {
    cfg = plan::parseConfig(text, "the declared layout");
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("declare_layout(): not a valid stagescope config: ") +
                                e.what());
  }
  if (cfg.worldSize != worldSize) {
    throw std::invalid_argument("declare_layout(): the layout has " +
                                std::to_string(cfg.worldSize) + " ranks, the job's world " +
                                std::to_string(worldSize));
  }
  const plan::Topology topology(cfg);
  const plan::Plan p = plan::makePlan(cfg, topology);
  DeclaredLayout out;
  out.modules = plan::moduleInfos(cfg);
  out.rows = plan::rankInfos(p.ranks.at(static_cast<size_t>(rank)), p);
  out.microbatches = cfg.microbatches;
  out.schedule = events::parseJobSchedule(text);
  for (const events::JobStage& j : out.schedule) {
    if (j.rank != rank) continue;
    for (auto& r : out.rows) {
      if (r.module != j.module) continue;
      r.globalStage = j.globalStage;
      r.totalStages = j.totalStages;
      r.warmup = j.warmup;
    }
  }
  return out;
}
}  // namespace

std::vector<events::RankInfo> CaptureSession::rankRows(
    std::vector<events::RankInfo> declared) const {
  if (declared.empty()) {  // no layout: one flat pipeline, a stage per rank
    events::RankInfo info;
    info.rank = rank_;
    info.module = "job";
    info.pp = rank_;
    info.globalStage = rank_;
    info.totalStages = worldSize_;
    declared.push_back(info);
  }
  for (auto& r : declared) {
    r.host = hostName();
    r.device = "cpu";
    r.pid = getpid();
  }
  return declared;
}

void CaptureSession::writeRunFileInfo(const events::RunInfo& info) const {
  storage::Db db = storage::openStagescopeFile(cfg_.runPath, true);
  storage::Transaction tx(db);  // the run row and its modules change together
  storage::writeRunInfo(db, info);
  tx.commit();
}

void CaptureSession::declareLayout(const std::string& configText) {
  int rank = -1, worldSize = 0;
  {
    std::lock_guard lock(mu_);
    if (!writer_) {
      throw std::logic_error(
          "declare_layout(): call it after init_process_group (the run is not started)");
    }
    rank = rank_;
    worldSize = worldSize_;
  }
  DeclaredLayout layout;
  if (!configText.empty()) layout = parseDeclared(configText, rank, worldSize);
  std::lock_guard lock(mu_);
  declaredLayout_ = configText;
  if (!declaredLayout_.empty() && declaredLayout_.back() != '\n') declaredLayout_ += '\n';
  declaredModules_ = layout.modules;
  declaredSchedule_ = layout.schedule;
  declaredMicrobatches_ = layout.microbatches;
  if (finished_) return;
  // Every shard names its run by the config's hash (merge refuses a shard of another config):
  // each rank's shard takes the new text; rank 0 also updates the run file.
  const auto info = runInfo(RunStatus::Running, "");
  writer_->run(info);
  if (shard_) shard_->replaceRanks(rank_, rankRows(layout.rows));
  if (rank_ != 0) return;
  writeRunFileInfo(info);
}

void CaptureSession::step(int iteration) {
  if (iteration < 0) throw std::invalid_argument("step(): iteration must be >= 0");
  std::lock_guard lock(mu_);
  iteration_ = iteration;
  maxIteration_ = std::max(maxIteration_, iteration);
  seq_ = 0;
  channels_.clear();
  collectives_.clear();
}

int CaptureSession::iteration() const {
  std::lock_guard lock(mu_);
  return iteration_;
}

CaptureSession::OpIds CaptureSession::nextMessage(const std::string& group, int src, int dst,
                                                  int tag) {
  std::lock_guard lock(mu_);
  return {iteration_, seq_++, channels_[{group, src, dst, tag}]++};
}

CaptureSession::OpIds CaptureSession::nextShapeMessage(const std::string& group, int src, int dst,
                                                       int tag) {
  std::lock_guard lock(mu_);
  return {iteration_, seq_++, channels_[{group, src, dst, tag}]};
}

void CaptureSession::setShapePreambles(bool on) {
  std::lock_guard lock(mu_);
  shapePreambles_ = on;
}

bool CaptureSession::shapePreambles() const {
  std::lock_guard lock(mu_);
  return shapePreambles_;
}

void CaptureSession::expectRole(const void* dataPtr, ExpectedRole role) {
  std::lock_guard lock(mu_);
  roles_[dataPtr] = std::move(role);
}

void CaptureSession::clearRoles() {
  std::lock_guard lock(mu_);
  roles_.clear();
}

std::optional<CaptureSession::ExpectedRole> CaptureSession::roleOf(const void* dataPtr) const {
  std::lock_guard lock(mu_);
  auto it = roles_.find(dataPtr);
  if (it == roles_.end()) return std::nullopt;
  return it->second;
}

void CaptureSession::beginBatch() {
  std::lock_guard lock(mu_);
  batch_ = batches_++;
}

void CaptureSession::endBatch() {
  std::lock_guard lock(mu_);
  batch_ = -1;
}

int CaptureSession::currentBatch() const {
  std::lock_guard lock(mu_);
  return batch_;
}

CaptureSession::OpIds CaptureSession::nextCollective(const std::string& group) {
  std::lock_guard lock(mu_);
  return {iteration_, seq_++, collectives_[group]++};
}

void CaptureSession::lateCompletion(const events::WaitRecord& w, const std::string& what,
                                    int64_t tookNs) {
  char text[64];
  std::snprintf(text, sizeof text, "completed after %.1f s", static_cast<double>(tookNs) / 1e9);
  events::DiagnosisRecord d;
  d.rank = rank_;
  d.kind = events::DiagnosisKind::LateCompletion;
  d.iteration = w.iteration;
  d.actionSeq = w.actionSeq;
  d.waitsOnRank = w.peer;
  d.message = what + ": " + text + " (reported stuck at the hang timeout)";
  d.timeNs = engine::nowNs();
  std::lock_guard lock(mu_);
  stuckNow_ = std::max(0, stuckNow_ - 1);
  if (writer_ && !finished_) writer_->diagnosis(std::move(d));
}

namespace {
bool looksLikeTimeout(const std::string& error) {
  return error.find("imed out") != std::string::npos || error.find("imeout") != std::string::npos;
}
}  // namespace

void CaptureSession::failed(events::WaitRecord w, const std::string& what, const std::string& error,
                            bool reported) {
  events::DiagnosisRecord d;
  d.rank = rank_;
  d.kind =
      looksLikeTimeout(error) ? events::DiagnosisKind::Timeout : events::DiagnosisKind::OpFailed;
  d.iteration = w.iteration;
  d.actionSeq = w.actionSeq;
  d.waitsOnRank = w.peer;
  d.message = what + " did not complete: " + engine::backendReason(error);
  d.timeNs = engine::nowNs();
  {
    std::lock_guard lock(mu_);
    if (reported) stuckNow_ = std::max(0, stuckNow_ - 1);  // now a failure, counted below
    if (d.kind == events::DiagnosisKind::Timeout && !reported && writer_ && !finished_) {
      w.rank = rank_;
      w.error = engine::backendReason(error);
      w.timeNs = d.timeNs;
      writer_->wait(std::move(w));
    }
  }
  failure(std::move(d));
}

void CaptureSession::failure(events::DiagnosisRecord d) {
  DigestWorker::instance().drain();  // what completed before the failure goes into this flush
  std::lock_guard lock(mu_);
  failed_ = true;
  timedOut_ = timedOut_ || d.kind == events::DiagnosisKind::Timeout;
  if (firstFailure_.empty()) firstFailure_ = d.message;
  if (!writer_ || finished_) return;
  writer_->diagnosis(std::move(d));
  try {
    writer_->flush();
  } catch (const std::exception&) {
    // the writer keeps its error; close() reports nothing more useful here
  }
}

void CaptureSession::finish(RunStatus status, const std::string& reason) {
  // Stop the watchdog first, without the lock: its reports take the lock.
  HangWatchdog* dog = nullptr;
  {
    std::lock_guard lock(mu_);
    dog = finished_ ? nullptr : watchdog_.get();
  }
  if (dog) dog->stop();
  DigestWorker::instance().drain();  // every op's records are in the writer before it closes
  std::lock_guard lock(mu_);
  if (!writer_ || finished_) return;
  finished_ = true;
  recordEndLocked(status, reason);
  if (failed_) {
    // An operation of this rank did not complete: the job then ended normally, or raised c10d's
    // error (a consequence, said by this rank's rank_failed row); the operation decides.
    return finishLocked(timedOut_ ? RunStatus::Hung : RunStatus::Failed,
                        "rank " + std::to_string(rank_) + ": " + firstFailure_);
  }
  if (status == RunStatus::Completed && stuckNow_ > 0) {
    // The job is leaving while an operation the watchdog reported is still pending.
    return finishLocked(RunStatus::Hung, "rank " + std::to_string(rank_) + ": " + firstStuck_);
  }
  finishLocked(status, reason);
}

void CaptureSession::recordEndLocked(RunStatus status, const std::string& reason) {
  events::DiagnosisRecord d;
  d.rank = rank_;
  d.iteration = iteration_;
  d.timeNs = engine::nowNs();
  if (status == RunStatus::Completed) {
    d.kind = events::DiagnosisKind::RankEnd;
    d.message = "rank " + std::to_string(rank_) + " left normally";
  } else {
    d.kind = events::DiagnosisKind::RankFailed;
    d.message = reason.empty() ? "rank " + std::to_string(rank_) + " ended " +
                                     events::toString(status) + " (finish() said so)"
                               : reason;
  }
  writer_->diagnosis(std::move(d));
}

void CaptureSession::aborted(const std::string& why) {
  // The dying thread may be any thread; the lock may be held by one that will never run again.
  std::unique_lock lock(mu_, std::defer_lock);
  for (int i = 0; i < 200 && !lock.try_lock(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!lock.owns_lock() || !writer_ || finished_) return;
  finished_ = true;
  const std::string line =
      "rank " + std::to_string(rank_) + " aborted: " + engine::backendReason(why);
  const std::vector<PendingOp> pending =
      watchdog_ ? watchdog_->pendingOps() : std::vector<PendingOp>{};
  for (const auto& op : pending) {
    events::DiagnosisRecord d;
    d.rank = rank_;
    d.kind = events::DiagnosisKind::OpFailed;
    d.iteration = op.wait.iteration;
    d.actionSeq = op.wait.actionSeq;
    d.waitsOnRank = op.wait.peer;
    d.message =
        op.what + " did not complete: the process aborted (" + engine::backendReason(why) + ")";
    d.timeNs = engine::nowNs();
    writer_->diagnosis(std::move(d));
  }
  events::DiagnosisRecord end;
  end.rank = rank_;
  end.kind = events::DiagnosisKind::RankFailed;
  end.iteration = iteration_;
  end.message =
      line + (pending.empty()
                  ? ""
                  : "; it had posted " + pending.front().what +
                        (pending.size() > 1 ? " and " + std::to_string(pending.size() - 1) + " more"
                                            : "") +
                        ", never completed");
  end.timeNs = engine::nowNs();
  writer_->diagnosis(std::move(end));
  failed_ = true;
  if (firstFailure_.empty()) firstFailure_ = line;
  finishLocked(RunStatus::Failed, line);
}

void CaptureSession::finishLocked(RunStatus status, const std::string& reason) {
  if (rank_ == 0) {
    // The run file's row is what merge keeps; the shard's copy documents the shard alone.
    const auto info = runInfo(status, reason);
    writer_->run(info);
    try {
      writeRunFileInfo(info);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "stagescope backend: could not update run file '%s': %s\n",
                   cfg_.runPath.c_str(), e.what());
    }
  }
  writer_->close();
}

}  // namespace stagescope::capture
