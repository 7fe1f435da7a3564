// `stagescope worker CONFIG --out RUN`: one rank.  Started by `stagescope run` (which hosts
// the store), or directly by torchrun/Slurm-style launchers (rank 0 hosts the store at
// MASTER_ADDR:MASTER_PORT).  Writes its shard "<RUN>.rank<N>.shard" next to the run file.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "app/Commands.h"
#include "core/engine/Communicator.h"
#include "core/engine/Executor.h"
#include "core/engine/Launcher.h"
#include "core/engine/ProcessGroups.h"
#include "core/engine/RankEnv.h"
#include "core/engine/Rendezvous.h"
#include "core/engine/RunIdentity.h"
#include "core/plan/Config.h"
#include "core/plan/ConfigFields.h"
#include "core/plan/Plan.h"
#include "core/plan/Topology.h"
#include "storage/Merge.h"
#include "storage/Schema.h"
#include "storage/ShardWriter.h"

namespace stagescope::app {
namespace {

std::string hostName() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

events::RankInfo rankInfo(const plan::RankPlan& me, const plan::Plan& p,
                          const std::string& device) {
  events::RankInfo info;
  info.rank = me.rank;
  info.module = me.module;
  info.tp = me.tp;
  info.cp = me.cp;
  info.pp = me.pp;
  info.dp = me.dp;
  info.globalStage = me.globalStage;
  info.totalStages = p.totalStages;
  info.warmup = me.warmup;
  info.host = hostName();
  info.device = device;
  info.pid = getpid();
  return info;
}

engine::RunIdentity identityOf(const plan::RunConfig& cfg, const std::string& out) {
  engine::RunIdentity id;
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
  events::parseRecordLevel(cfg.record.level, &info.level);
  info.versionStagescope = id.stagescopeVersion;
  info.versionTorch = id.torchVersion;
  return info;
}

// Records a diagnosis of this rank in its shard and closes the shard (the rank stops).
void recordAndClose(storage::ShardWriter* recorder, events::DiagnosisRecord d) {
  if (!recorder) return;
  recorder->diagnosis(std::move(d));
  recorder->close();
}

at::Device deviceFor(const plan::RunConfig& cfg, const engine::RankEnv& env) {
  // Several local ranks may share a GPU under Gloo (NCCL was checked to have one per rank).
  if (cfg.device == "cuda") {
    const int gpus = std::max<int>(1, static_cast<int>(torch::cuda::device_count()));
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.localRank % gpus));
  }
  return at::Device(at::kCPU);
}

}  // namespace

int workerCommand(const WorkerOptions& opts) {
  std::unique_ptr<storage::ShardWriter> recorder;
  int rank = -1;
  try {
    // Ranks share this machine's cores: one intra-op thread each, or they oversubscribe.
    at::set_num_threads(1);
    const engine::RankEnv env = engine::readRankEnv();
    rank = env.rank;
    const plan::RunConfig cfg = plan::loadConfig(opts.config);
    if (env.worldSize != cfg.worldSize) {
      throw std::runtime_error("WORLD_SIZE = " + std::to_string(env.worldSize) + " but " +
                               opts.config + " places modules on " + std::to_string(cfg.worldSize) +
                               " ranks");
    }
    const plan::Topology topology(cfg);
    const plan::Plan plan = plan::makePlan(cfg, topology);
    events::RecordLevel level = events::RecordLevel::Stats;
    events::parseRecordLevel(cfg.record.level, &level);
    recorder = storage::ShardWriter::open(storage::shardPathFor(opts.out, rank), level, rank);
    const at::Device device = deviceFor(cfg, env);
    recorder->rank(rankInfo(plan.ranks[rank], plan, device.str()));
    const engine::RunIdentity identity = identityOf(cfg, opts.out);
    recorder->run(shardRunInfo(cfg, identity));
    for (int it = 0; it < cfg.iterations; ++it) {
      if (!cfg.record.wants(it, plan.ranks[rank].module, rank)) continue;
      for (auto& a : plan::toRecords(plan.ranks[rank], it)) recorder->planned(std::move(a));
    }
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.timeoutSeconds * 1000));
    auto store = engine::connectStore(env.masterAddr, env.masterPort,
                                      !env.launcherHostsStore && rank == 0, env.worldSize, timeout);
    engine::verifyRunIdentity(*store, rank, env.worldSize, identity, timeout);
    engine::ProcessGroups groups(
        store, rank, env.worldSize,
        cfg.backend == "nccl" ? engine::BackendKind::Nccl : engine::BackendKind::Gloo, timeout);
    engine::Communicator::createAllGroups(cfg, topology, groups);
    engine::Executor executor(cfg, topology, plan, rank, groups, *recorder, device);
    const auto& me = plan.ranks[rank];
    for (int it = 0; it < cfg.iterations; ++it) {
      engine::IterationResult r = executor.runIteration(it);
      recorder->flush();  // every iteration is durable before the next starts
      if (r.hasLoss && me.tp == 0 && me.dp == 0) {
        std::printf("iteration %d  loss %.6f  time %.3f s\n", it, r.loss, r.seconds);
        std::fflush(stdout);
      }
    }
    recorder->close();
    return engine::kWorkerOk;
  } catch (const engine::RendezvousError& e) {
    std::fprintf(stderr, "error: rank %d: %s\n", rank, e.what());
    events::DiagnosisRecord d;
    d.rank = rank;
    const bool mismatch = e.kind() == engine::RendezvousError::Kind::Mismatch;
    d.kind = mismatch ? "config_mismatch" : "timeout";
    d.message = e.what();
    recordAndClose(recorder.get(), std::move(d));
    return mismatch ? engine::kWorkerMismatch : engine::kWorkerTimeout;
  } catch (const engine::StoreTimeout& e) {
    std::fprintf(stderr, "error: rank %d: %s\n", rank, e.what());
    events::DiagnosisRecord d;
    d.rank = rank;
    d.kind = "timeout";
    d.message = e.what();
    recordAndClose(recorder.get(), std::move(d));
    return engine::kWorkerTimeout;
  } catch (const engine::CommTimeout& e) {
    std::fprintf(stderr, "%s\n", e.what());
    if (recorder) {
      events::DiagnosisRecord d;
      d.rank = rank;
      d.kind = "timeout";
      d.waitsOnRank = e.peer();
      d.message = e.what();
      recorder->diagnosis(d);
      recorder->close();
    }
    return engine::kWorkerTimeout;
  } catch (const std::exception& e) {
    // One line: torch errors carry a backtrace and "Exception raised from" after the message.
    const auto* torchError = dynamic_cast<const c10::Error*>(&e);
    std::string message = torchError ? torchError->what_without_backtrace() : e.what();
    message = message.substr(0, message.find('\n'));
    // A transport error means a peer went away (it failed or timed out first): this rank
    // is a consequence, like a timeout, not a cause.
    const bool peerLost = message.find("Connection closed by peer") != std::string::npos ||
                          message.find("Connection reset by peer") != std::string::npos ||
                          message.find("gloo/transport") != std::string::npos;
    std::fprintf(stderr, "error: rank %d: %s\n", rank, message.c_str());
    if (recorder) {
      events::DiagnosisRecord d;
      d.rank = rank;
      d.kind = peerLost ? "peer_lost" : "error";
      d.message = message;
      recorder->diagnosis(d);
      recorder->close();
    }
    return peerLost ? engine::kWorkerTimeout : engine::kWorkerError;
  }
}

}  // namespace stagescope::app
