// `stagescope worker CONFIG --out RUN`: one rank.  Started by `stagescope run` (which hosts
// the store), or directly by torchrun/Slurm-style launchers (rank 0 hosts the store at
// MASTER_ADDR:MASTER_PORT).  Writes its shard "<RUN>.rank<N>.shard" next to the run file.
#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "app/Commands.h"
#include "app/WorkerLiveness.h"
#include "core/engine/Communicator.h"
#include "core/engine/ElasticErrorFile.h"
#include "core/engine/Executor.h"
#include "core/engine/Launcher.h"
#include "core/engine/PrepostPolicy.h"
#include "core/engine/ProcessGroups.h"
#include "core/engine/RankEnv.h"
#include "core/engine/Rendezvous.h"
#include "core/engine/RunIdentity.h"
#include "core/events/Printable.h"
#include "core/plan/Config.h"
#include "core/plan/ConfigFields.h"
#include "core/plan/Plan.h"
#include "core/plan/RunLayout.h"
#include "core/plan/Topology.h"
#include "storage/Merge.h"
#include "storage/OutputPolicy.h"
#include "storage/Schema.h"
#include "storage/ShardWriter.h"

namespace stagescope::app {
namespace {

std::string hostName() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// One `ranks` row per (rank, module) the rank holds: a colocated rank has several.
std::vector<events::RankInfo> rankInfos(const plan::RankPlan& me, const plan::Plan& p,
                                        const std::string& device) {
  std::vector<events::RankInfo> out = plan::rankInfos(me, p);
  for (auto& info : out) {
    info.host = hostName();
    info.device = device;
    info.pid = getpid();
  }
  return out;
}

engine::RunIdentity identityOf(const plan::RunConfig& cfg, const std::string& out,
                               const engine::GlooAddress& gloo) {
  engine::RunIdentity id;
  id.host = hostName();
  id.glooAddress = gloo.describe();
  id.glooLoopback = gloo.loopback;
  id.runId = engine::runIdFor(out);
  id.config = plan::canonicalFields(cfg);
  id.configHash = plan::configHash(cfg);
  id.formatVersion = storage::kSchemaVersion;
  id.stagescopeVersion = engine::kStagescopeVersion;
  id.torchVersion = TORCH_VERSION;
  return id;
}

// The shard's `run` row: the identity this rank ran under, so that `merge` can refuse a shard
// of another run or config.
events::RunInfo shardRunInfo(const plan::RunConfig& cfg, const engine::RunIdentity& id) {
  events::RunInfo info;
  info.runId = id.runId;
  info.configText = cfg.text;
  info.configHash = id.configHash;
  info.worldSize = cfg.worldSize;
  info.iterations = cfg.iterations;
  info.microbatches = cfg.microbatches;
  info.level = cfg.record.level;
  info.recordFilter = cfg.record.filter();
  info.versionStagescope = id.stagescopeVersion;
  info.versionTorch = id.torchVersion;
  return info;
}

// Opens this rank's shard "<out>.rank<N>.shard" as a new file.  A file already there (or its
// -wal/-shm/-journal) was not created by this run's rank, so it is never removed or
// overwritten: the rank stops with one line (exit 1).  The one exception is torchrun restarting
// the job (TORCHELASTIC_RESTART_COUNT > 0): the shard an earlier attempt of the same run (the
// same run id) wrote for this rank is replaced, as that attempt's records are superseded.
std::unique_ptr<storage::ShardWriter> openOwnShard(const std::string& out, int rank,
                                                   events::RecordLevel level,
                                                   const engine::RankEnv& env) {
  const std::string shard = storage::shardPathFor(out, rank);
  storage::ShardWriterOptions opts;
  opts.replaceExisting = false;
  if (env.restartCount > 0) {
    try {
      const auto earlier = storage::readShardRunInfo(shard);
      opts.replaceExisting = earlier && earlier->runId == engine::runIdFor(out);
    } catch (const std::exception&) {
      // missing, not a shard, unreadable: not ours to replace
    }
  }
  // `-o runs/x.db` works for a worker as it does for `run`: the folder is created (by whichever
  // rank of this host comes first; the others find it there).
  storage::createParentDirectories(shard);
  try {
    return storage::ShardWriter::open(shard, level, rank, opts);
  } catch (const storage::ShardExists& e) {
    throw std::runtime_error(
        e.path() + ": already exists (left by an earlier run?); a worker never replaces a file " +
        "it did not create: move it away, or give another -o");
  }
}

// Stops this rank: one line on stderr (a CommTimeout's text is already a full sentence), the
// diagnosis in its shard, the shard closed, torchrun's error file written when it asks for
// one; returns the exit code.
int stop(storage::ShardWriter* recorder, std::vector<events::RankInfo>& pendingRank, int rank,
         const std::string& errorFile, events::DiagnosisKind kind, const std::string& text,
         int waitsOn, int code, WorkerLiveness* live = nullptr) {
  const std::string message = events::printableLine(text);  // one line, whatever it quotes
  std::string rootCause;
  const bool consequence =
      kind == events::DiagnosisKind::Timeout || kind == events::DiagnosisKind::PeerLost;
  if (live) {
    // The heartbeat thread may already be finishing this process (a dead peer, a signal).
    if (!WorkerLiveness::claimFinish()) {
      for (;;) pause();
    }
    // A consequence (a wait that timed out, a lost peer): name the root cause first.
    if (consequence) rootCause = live->reportRootCause();
  }
  if (kind == events::DiagnosisKind::Timeout && waitsOn >= 0)
    std::fprintf(stderr, "%s\n", message.c_str());
  else if (rank < 0)  // stopped before its rank was known (the environment named none)
    std::fprintf(stderr, "error: %s\n", message.c_str());
  else
    std::fprintf(stderr, "error: rank %d: %s\n", rank, message.c_str());
  if (recorder) {
    for (auto& info : pendingRank) recorder->rank(info);  // stopped before the clock estimate
    events::DiagnosisRecord d;
    d.rank = rank;
    d.kind = kind;
    d.waitsOnRank = waitsOn;
    d.message = message;
    recorder->diagnosis(std::move(d));
    recorder->close();
  }
  engine::writeElasticErrorFile(
      errorFile, "rank " + std::to_string(rank) + ": " +
                     (rootCause.empty() ? "" : "root cause: " + rootCause + "; ") + message);
  if (live) live->end((consequence ? "waited " : "failed ") + message);  // last: may linger
  return code;
}

// A `clock` diagnosis row with the estimate of one phase (rank 0 is the reference: none).
void recordClock(storage::ShardWriter& recorder, int rank, const std::string& phase,
                 const engine::ClockEstimate& c) {
  if (rank == 0) return;
  events::DiagnosisRecord d;
  d.rank = rank;
  d.kind = events::DiagnosisKind::Clock;
  d.message = "clock offset to rank 0 (" + phase + "): measured " + std::to_string(c.measuredNs) +
              " ns +- " + std::to_string(c.uncertaintyNs) +
              " ns (half the smallest round trip); recorded offset " + std::to_string(c.offsetNs) +
              " ns; took " + std::to_string(c.elapsedNs / 1000000) + " ms";
  recorder.diagnosis(std::move(d));
}

at::Device deviceFor(const plan::RunConfig& cfg, const engine::RankEnv& env) {
  // Several local ranks may share a GPU under Gloo (NCCL was checked to have one per rank).
  if (cfg.device == plan::Device::Cuda) {
    const int gpus = std::max<int>(1, static_cast<int>(torch::cuda::device_count()));
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.localRank % gpus));
  }
  return at::Device(at::kCPU);
}

// What the rank's run and its failure paths share: workerCommand's one try/catch stops the
// rank with whatever of it exists when an exception arrives.  Members go in reverse order:
// the liveness client before the store, the store (rank 0 may host it: the peers still need
// it to say why they stop) after every failure path, the shard last.
struct WorkerSession {
  std::unique_ptr<storage::ShardWriter> recorder;  // this rank's shard, once opened
  int rank = -1;                                   // until the environment names it
  std::string errorFile;                           // TORCHELASTIC_ERROR_FILE
  std::vector<events::RankInfo> pendingRank;       // until the clock offset is known
  c10::intrusive_ptr<c10d::Store> store;
  std::unique_ptr<WorkerLiveness> live;  // heartbeats, once the rendezvous agreed
};

// The environment's world size must be the config's: a rank started by hand (no launcher set
// WORLD_SIZE) is told to use `stagescope run`, any other is told both numbers.
void checkWorldSize(const engine::RankEnv& env, const plan::RunConfig& cfg,
                    const std::string& config) {
  if (env.worldSize == cfg.worldSize) return;
  if (!std::getenv("WORLD_SIZE") && !std::getenv("SLURM_NTASKS")) {
    throw std::runtime_error(
        "WORLD_SIZE is not set: `stagescope worker` runs one rank under torchrun or Slurm "
        "(they set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); `stagescope run " +
        config + "` launches all " + std::to_string(cfg.worldSize) + " ranks here");
  }
  throw std::runtime_error("WORLD_SIZE = " + std::to_string(env.worldSize) + " but " + config +
                           " places modules on " + std::to_string(cfg.worldSize) + " ranks");
}

// The modules whose stages this rank holds (several when colocated).
std::vector<std::string> modulesOf(const plan::RankPlan& me) {
  std::vector<std::string> modules;
  for (const auto& s : me.stages) modules.push_back(s.module);
  return modules;
}

// The rendezvous: connects `s.store` (hosted by rank 0, or by torchrun's agent) and checks
// that every rank runs this run with this config.  Throws engine::RendezvousError (a
// MASTER_ADDR that does not resolve: kind Network) or engine::StoreTimeout.
void joinRun(WorkerSession& s, const engine::RankEnv& env, const engine::RunIdentity& identity,
             std::chrono::milliseconds timeout) {
  if (!env.hostsStore()) {
    // A name that does not resolve is said as such, at once (the store's client would retry
    // it until the timeout and then look like a store that does not answer).
    if (const std::string why = engine::resolveProblem(env.masterAddr); !why.empty())
      throw engine::RendezvousError(
          engine::RendezvousError::Kind::Network,
          "rendezvous: MASTER_ADDR = '" + env.masterAddr + "' does not resolve (" + why +
              "); expected the host name or address of rank 0's machine, which hosts the store");
  }
  s.store = engine::connectStore(env.masterAddr, env.masterPort, env.hostsStore(), env.worldSize,
                                 timeout);
  if (env.agentHostsStore) {
    // torchrun's agent store outlives restarts: each attempt gets its own key space.
    s.store = c10::make_intrusive<c10d::PrefixStore>(
        "stagescope/attempt_" + std::to_string(env.restartCount), s.store);
  }
  engine::verifyRunIdentity(*s.store, s.rank, env.worldSize, identity, timeout);
}

// Clocks: the rank rows, held back until now, carry this host's offset to rank 0's clock (a
// shifted clock, e.g. another host's boot time, lands on one timeline when readers subtract
// it); the estimate itself is a `clock` diagnosis.
void recordStartClock(WorkerSession& s, int worldSize, std::chrono::milliseconds timeout) {
  const engine::ClockEstimate clock =
      engine::estimateClockOffset(*s.store, s.rank, worldSize, "start", timeout);
  for (auto& info : s.pendingRank) {
    info.clockOffsetNs = clock.offsetNs;
    info.clockOffsetUncertaintyNs = clock.uncertaintyNs;
    s.recorder->rank(info);
  }
  s.pendingRank.clear();
  recordClock(*s.recorder, s.rank, "start", clock);
}

// Liveness: this rank's process and heartbeat in the store, so that any rank can name a peer
// that died (whatever launcher started the ranks).  STAGESCOPE_LIVENESS=0 turns it off: only
// for measuring what it costs (bench).
void startLiveness(WorkerSession& s, const engine::RankEnv& env, const plan::RunConfig& cfg,
                   const plan::RankPlan& me, std::chrono::milliseconds timeout) {
  const char* liveness = std::getenv("STAGESCOPE_LIVENESS");
  if (liveness && std::string(liveness) == "0") return;
  s.live = std::make_unique<WorkerLiveness>(env, timeout, *s.recorder, me);
  s.live->arm(env, cfg.timeoutSeconds);
}

// Whether the executor posts its receives ahead (core/engine/PrepostPolicy.h):
// STAGESCOPE_PREPOST when set, else by the cores this host's ranks share.
bool prepostFor(const engine::RankEnv& env, const at::Device& device) {
  engine::PrepostInputs prepost;
  if (const char* v = std::getenv("STAGESCOPE_PREPOST")) prepost.setting = v;
  prepost.ranksOnHost = env.localWorldSize;
  prepost.cores = engine::usableCores();
  prepost.accelerator = device.is_cuda();
  return engine::prepostReceives(prepost);
}

// Before the executor goes, the heartbeat stops reading its progress: declared after it.
struct DetachProgress {
  WorkerLiveness* live;
  ~DetachProgress() {
    if (live) live->attach(nullptr);
  }
};

// Iteration `it`'s progress line: N/total and the time left at the mean pace so far (the
// progress lines in README "A first run"): long runs show where they are.
void printProgress(int it, const engine::IterationResult& r, int iterations,
                   std::chrono::steady_clock::time_point started) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const int done = it + 1;
  std::printf("iteration %d  loss %.6f  time %.3f s  (%d/%d, %.0f s left)\n", it, r.loss, r.seconds,
              done, iterations, elapsed / done * (iterations - done));
  std::fflush(stdout);
}

// The plan's iterations.  The LLM's first stage (tp 0, dp 0) prints a progress line for each
// iteration with a loss.
void runIterations(const plan::RunConfig& cfg, const plan::RankPlan& me, engine::Executor& executor,
                   events::FilteringRecorder& filtered, storage::ShardWriter& recorder) {
  const auto started = std::chrono::steady_clock::now();
  for (int it = 0; it < cfg.iterations; ++it) {
    // The plan rows of an iteration are written as it starts: the first step does not wait
    // for the plan of every iteration, and the rows grow with the iterations executed.
    for (auto& a : plan::toRecords(me, it)) filtered.planned(std::move(a));

    engine::IterationResult r = executor.runIteration(it);
    recorder.flush();  // every iteration is durable before the next starts
    const plan::RankStage* llm = me.stage(cfg.llm().name);
    if (r.hasLoss && llm && llm->tp == 0 && llm->dp == 0)
      printProgress(it, r, cfg.iterations, started);
  }
}

// The clock offset again at the end, to bound the drift over the run: a failure to estimate
// it is a `clock` diagnosis, not fatal (the run is done).
void recordEndClock(WorkerSession& s, int worldSize, std::chrono::milliseconds timeout) {
  try {
    recordClock(*s.recorder, s.rank, "end",
                engine::estimateClockOffset(*s.store, s.rank, worldSize, "end", timeout));
  } catch (const std::exception& e) {
    events::DiagnosisRecord d;
    d.rank = s.rank;
    d.kind = events::DiagnosisKind::Clock;
    d.message = e.what();
    s.recorder->diagnosis(std::move(d));
  }
}

// The run is done: the end clock, the shard closed, then "completed" published to the peers.
void finishRank(WorkerSession& s, int worldSize, std::chrono::milliseconds timeout) {
  recordEndClock(s, worldSize, timeout);
  if (s.live && !WorkerLiveness::claimFinish()) {
    for (;;) pause();  // the heartbeat thread is ending this process (a signal)
  }
  s.recorder->close();
  if (s.live) s.live->end("completed");  // last: the store's host waits for its peers
}

// The rank's run from its environment to its end: reads the environment and the config, opens
// the shard, joins the rendezvous, runs the plan's iterations and closes the shard; returns
// kWorkerOk.  When it throws, what it had set up stays in `s` for the failure paths.
int runRank(WorkerSession& s, const WorkerOptions& opts) {
  // Ranks share this machine's cores: one intra-op thread each, or they oversubscribe.
  at::set_num_threads(1);
  const engine::RankEnv env = engine::readRankEnv();
  s.rank = env.rank;
  s.errorFile = env.errorFile;
  const plan::RunConfig cfg = plan::loadConfig(opts.config);
  checkWorldSize(env, cfg, opts.config);
  const plan::Topology topology(cfg);
  const plan::Plan plan = plan::makePlan(cfg, topology);
  const plan::RankPlan& me = plan.ranks[s.rank];
  s.recorder = openOwnShard(opts.out, s.rank, cfg.record.level, env);
  // Every record of this rank passes the [record] filters, whichever part emits it.
  events::FilteringRecorder filtered(*s.recorder, cfg.record.filter(), s.rank, modulesOf(me));
  const at::Device device = deviceFor(cfg, env);
  s.pendingRank = rankInfos(me, plan, device.str());
  const engine::GlooAddress gloo = engine::chooseGlooAddress(env.masterAddr, env.masterPort);
  const engine::RunIdentity identity = identityOf(cfg, opts.out, gloo);
  filtered.run(shardRunInfo(cfg, identity));
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.timeoutSeconds * 1000));
  joinRun(s, env, identity, timeout);
  recordStartClock(s, env.worldSize, timeout);
  startLiveness(s, env, cfg, me, timeout);
  engine::ProcessGroups groups(
      s.store, s.rank, env.worldSize,
      cfg.backend == plan::Backend::Nccl ? engine::BackendKind::Nccl : engine::BackendKind::Gloo,
      timeout);
  groups.setGlooAddress(gloo);
  engine::Communicator::createAllGroups(cfg, topology, groups);
  engine::Executor executor(cfg, topology, plan, s.rank, groups, filtered, device,
                            prepostFor(env, device));
  if (s.live) {
    s.live->learnPeers();  // the groups exist: every peer has published its process
    s.live->attach(&executor.waitState());
  }
  const DetachProgress detach{s.live.get()};
  runIterations(cfg, me, executor, filtered, *s.recorder);
  finishRank(s, env.worldSize, timeout);
  return engine::kWorkerOk;
}

// ---- the failure paths: one per exception kind; each returns the rank's exit code ----------

// The rendezvous cannot go on: the ranks disagree on the run (config_mismatch), an address
// does not resolve or cannot be reached (network), or a rank did not arrive in time (timeout).
int stopAtRendezvous(WorkerSession& s, const engine::RendezvousError& e) {
  using Kind = engine::RendezvousError::Kind;
  return stop(s.recorder.get(), s.pendingRank, s.rank, s.errorFile,
              e.kind() == Kind::Mismatch  ? events::DiagnosisKind::ConfigMismatch
              : e.kind() == Kind::Network ? events::DiagnosisKind::Network
                                          : events::DiagnosisKind::Timeout,
              e.what(), -1,
              e.kind() == Kind::Mismatch  ? engine::kWorkerMismatch
              : e.kind() == Kind::Network ? engine::kWorkerError
                                          : engine::kWorkerTimeout,
              s.live.get());
}

// The store did not answer in time.  Also after the heartbeats started (the end-of-run
// barrier): then, as every other path, stop() first claims the finish from the heartbeat thread
// and tells the peers how this rank ended.
int stopAtStoreTimeout(WorkerSession& s, const engine::StoreTimeout& e) {
  return stop(s.recorder.get(), s.pendingRank, s.rank, s.errorFile, events::DiagnosisKind::Timeout,
              e.what(), -1, engine::kWorkerTimeout, s.live.get());
}

// A received payload that differs from what its sender sent: the Communicator recorded the
// transfer and the "corrupt_transfer" diagnosis; here its sentence, the shard closed, the
// error file and the end.
int stopAtCorruptTransfer(WorkerSession& s, const engine::TransferCorrupt& e) {
  if (s.live && !WorkerLiveness::claimFinish()) {
    for (;;) pause();
  }
  std::fprintf(stderr, "%s\n", e.what());
  if (s.recorder) {
    for (auto& info : s.pendingRank) s.recorder->rank(info);
    s.recorder->close();
  }
  engine::writeElasticErrorFile(s.errorFile, "rank " + std::to_string(s.rank) + ": " + e.what());
  if (s.live) s.live->end(std::string("failed ") + e.what());  // last: may linger
  return engine::kWorkerCorrupt;
}

// A wait on a peer that ran past the timeout: a consequence, whose root cause stop() names.
int stopAtCommTimeout(WorkerSession& s, const engine::CommTimeout& e) {
  if (s.recorder) s.recorder->wait(e.wait());  // the same wait as data: the wait-for graph's edge
  return stop(s.recorder.get(), s.pendingRank, s.rank, s.errorFile, events::DiagnosisKind::Timeout,
              e.what(), e.peer(), engine::kWorkerTimeout, s.live.get());
}

// An error's message in one line: torch errors carry a backtrace and "Exception raised from"
// after the message.
std::string firstLineOf(const std::exception& e) {
  const auto* torchError = dynamic_cast<const c10::Error*>(&e);
  std::string message = torchError ? torchError->what_without_backtrace() : e.what();
  return message.substr(0, message.find('\n'));
}

// A transport error means a peer went away (it failed or timed out first): this rank is a
// consequence, like a timeout, not a cause.
bool isPeerLost(const std::string& message) {
  return message.find("Connection closed by peer") != std::string::npos ||
         message.find("Connection reset by peer") != std::string::npos ||
         message.find("gloo/transport") != std::string::npos;
}

// Any other error: this rank's own (error), or a peer that went away (peer_lost).
int stopAtError(WorkerSession& s, const std::exception& e) {
  const std::string message = firstLineOf(e);
  const bool peerLost = isPeerLost(message);
  return stop(s.recorder.get(), s.pendingRank, s.rank, s.errorFile,
              peerLost ? events::DiagnosisKind::PeerLost : events::DiagnosisKind::Error, message,
              -1, peerLost ? engine::kWorkerTimeout : engine::kWorkerError, s.live.get());
}

}  // namespace

int workerCommand(const WorkerOptions& opts) {
  // A write to a peer that died is an error this rank reports (EPIPE), not a signal that kills
  // it: a survivor dying of SIGPIPE would be taken for the rank that was killed.
  std::signal(SIGPIPE, SIG_IGN);
  WorkerSession s;
  try {
    return runRank(s, opts);
  } catch (const engine::RendezvousError& e) {
    return stopAtRendezvous(s, e);
  } catch (const engine::StoreTimeout& e) {
    return stopAtStoreTimeout(s, e);
  } catch (const engine::TransferCorrupt& e) {
    return stopAtCorruptTransfer(s, e);
  } catch (const engine::CommTimeout& e) {
    return stopAtCommTimeout(s, e);
  } catch (const std::exception& e) {
    return stopAtError(s, e);
  }
}

}  // namespace stagescope::app
