// `stagescope run CONFIG`: validate and plan, create the run file, host the rendezvous
// store, launch one process per rank, merge their shards, and mark the run with what
// happened.  Optionally record the single-process reference and check the result.
#include <torch/cuda.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/Commands.h"
#include "app/ErrorBoundary.h"
#include "app/FaultFlag.h"
#include "app/MergeWithProgress.h"
#include "app/ReferenceRecord.h"
#include "app/RunChecks.h"
#include "app/RunFileCreation.h"
#include "core/engine/Init.h"
#include "core/engine/Launcher.h"
#include "core/engine/PreforkedRanks.h"
#include "core/engine/RunIdentity.h"
#include "core/events/Printable.h"
#include "core/plan/Config.h"
#include "core/plan/ConfigFields.h"
#include "core/plan/MemoryEstimate.h"
#include "core/plan/Plan.h"
#include "core/plan/Topology.h"
#include "storage/Merge.h"
#include "storage/OutputPolicy.h"
#include "storage/RunFileLock.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"

namespace stagescope::app {
namespace {

namespace fs = std::filesystem;

std::string defaultOut(const std::string& config) {
  char stamp[32];
  std::time_t t = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
  return "runs/" + fs::path(config).stem().string() + "-" + stamp + "-" + std::to_string(getpid()) +
         ".db";
}

// "<base without extension>-<rep>.db": the run file of repetition `rep` of `run --repeat`.
std::string repetitionPath(const std::string& base, int rep) {
  return fs::path(base).replace_extension("").string() + "-" + std::to_string(rep) + ".db";
}

// The resolved config (overrides and --fault flags applied) that every rank loads: a file in a
// private temporary directory, removed with it when the run ends.
class ResolvedConfig {
 public:
  explicit ResolvedConfig(const std::string& text) {
    std::string dir = (fs::temp_directory_path() / "stagescope-XXXXXX").string();
    if (!::mkdtemp(dir.data())) {
      throw std::runtime_error(dir +
                               ": cannot create a temporary directory: " + std::strerror(errno));
    }
    dir_ = dir;
    path_ = dir_ + "/config.toml";
    std::ofstream f(path_, std::ios::binary);
    f << text;
    f.close();
    if (!f) throw std::runtime_error(path_ + ": cannot write the resolved config (disk full?)");
  }
  ResolvedConfig(const ResolvedConfig&) = delete;
  ResolvedConfig& operator=(const ResolvedConfig&) = delete;
  ~ResolvedConfig() {
    std::error_code ec;
    fs::remove(path_, ec);
    fs::remove(dir_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

// Writes the run's status.  When even that fails (e.g. the disk is full) the run file keeps
// status `running`; the message says how to finish it.
void recordStatus(const std::string& out, const events::RunStatus status,
                  const std::string& reason) {
  try {
    storage::updateRunStatus(out, status, reason, unixMs());
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "stagescope: could not record status %s in %s (%s); `stagescope merge %s` "
                 "judges the run again\n",
                 events::toString(status), out.c_str(), oneLine(e).c_str(), out.c_str());
  }
}

std::string selfExe() {
  return fs::read_symlink("/proc/self/exe").string();
}

// The device and backend must exist on this machine before any rank starts.
void checkDeviceAvailable(const plan::RunConfig& cfg, const std::string& file) {
  if (cfg.device != plan::Device::Cuda) return;
  const int gpus = static_cast<int>(torch::cuda::device_count());
  if (gpus == 0) {
    throw plan::ConfigError("device", file +
                                          ": device = \"cuda\": no CUDA device is visible to "
                                          "this build on this machine; expected device = \"cpu\"");
  }
  if (cfg.backend == plan::Backend::Nccl && gpus < cfg.worldSize) {
    throw plan::ConfigError(
        "backend", file + ": backend = \"nccl\": " + std::to_string(cfg.worldSize) +
                       " local ranks but " + std::to_string(gpus) +
                       " visible GPU(s); NCCL needs one GPU per rank — use backend = \"gloo\" "
                       "(point-to-point is staged through host memory)");
  }
}

struct Outcome {
  events::RunStatus status = events::RunStatus::Completed;
  std::string reason;
  bool corrupt = false;  // a rank stopped on a corrupted transfer (kExitCorruptTransfer)
  int firstRank = -1;    // a hung run: the first rank that timed out
  std::string remedy{};  // a hung run: what to change ("to change: ..."), printed after it
};

Outcome outcomeOf(const engine::LaunchResult& r) {
  if (r.interrupted) return {events::RunStatus::Killed, r.describe()};
  if (r.ok()) return {events::RunStatus::Completed, ""};
  const auto& first = r.ranks[r.firstFailure];
  if (!first.signal && first.exitCode == engine::kWorkerTimeout) {
    return {events::RunStatus::Hung, r.describe(), false, first.rank};
  }
  const bool corrupt = !first.signal && first.exitCode == engine::kWorkerCorrupt;
  return {events::RunStatus::Failed, r.describe(), corrupt};
}

// How each rank's process ended, as data: a rank killed by a signal or stopped by the launcher
// records nothing itself.  Kinds: rank_killed (a signal the launcher did not send),
// rank_stopped (the launcher stopped it), rank_exited (a non-zero exit other than a timeout,
// whose rank recorded its own "timeout" row).
void recordRankExits(const std::string& out, const engine::LaunchResult& launched) {
  std::vector<events::DiagnosisRecord> exits;
  for (const auto& r : launched.ranks) {
    events::DiagnosisRecord d;
    d.rank = r.rank;
    d.timeNs = r.endedNs;  // the order the ranks ended in: the first killed is the cause
    d.signal = r.signal;   // the signal that ended it (waitpid), 0 when it exited
    if (r.stoppedByUs) {
      d.kind = events::DiagnosisKind::RankStopped;
      d.message = launched.interrupted ? "stopped: the run was interrupted"
                                       : "stopped by the launcher after rank " +
                                             std::to_string(launched.firstFailure) + " failed";
    } else if (r.signal) {
      d.kind = events::DiagnosisKind::RankKilled;
      d.message = "killed by signal " + std::to_string(r.signal) + " (" + strsignal(r.signal) + ")";
    } else if (r.exitCode != 0 && r.exitCode != engine::kWorkerTimeout) {
      d.kind = events::DiagnosisKind::RankExited;
      d.message = "exited with code " + std::to_string(r.exitCode);
    } else {
      continue;
    }
    if (!r.lastLine.empty()) d.message += ": " + r.lastLine;
    exits.push_back(std::move(d));
  }
  if (exits.empty()) return;
  const std::string shard = out + ".exits.shard";
  auto writer = storage::ShardWriter::open(shard, events::RecordLevel::Meta, -1);
  for (auto& d : exits) writer->diagnosis(std::move(d));
  writer->close();
  storage::MergeResult m = storage::mergeShards(out, {shard});
  for (const auto& note : m.notes) std::fprintf(stderr, "merge: %s\n", note.c_str());
}

// One launch of the configured job into `out`.  Returns the outcome; throws on setup errors.
Outcome launchOnce(const plan::RunConfig& cfg, const std::string& configFile,
                   const std::string& out, bool quiet) {
  createNewRunFile(out, runInfoFor(cfg, out));
  // CPU ranks are forked now, before the store's server thread exists, and share this
  // process's LibTorch pages (engine/PreforkedRanks.h); CUDA ranks are exec'd.
  std::unique_ptr<engine::PreforkedRanks> preforked;
  if (cfg.device == plan::Device::Cpu) {
    preforked = engine::PreforkedRanks::prefork(cfg.worldSize, [configFile, out] {
      WorkerOptions worker;
      worker.config = configFile;
      worker.out = out;
      return workerCommand(worker);
    });
  }
  c10d::TCPStoreOptions so;
  so.port = 0;
  so.isServer = true;
  so.waitWorkers = false;
  // The launcher's own store on this host: creating it connects a client to it, which a tiny
  // timeout_seconds (1 ms) failed, with PyTorch's backtrace, before any rank started; it gets
  // at least kLocalStoreSeconds, the ranks' waits keep timeout_seconds.
  constexpr double kLocalStoreSeconds = 10;
  so.timeout = std::chrono::milliseconds(
      static_cast<int64_t>(std::max(cfg.timeoutSeconds, kLocalStoreSeconds) * 1000));
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);

  engine::LaunchSpec spec;
  spec.argv = {selfExe(), "worker", configFile, "--out", out};
  spec.worldSize = cfg.worldSize;
  spec.masterPort = store->getPort();
  spec.quiet = quiet;
  spec.preforked = preforked.get();
  // The ranks' run id is the run file's, whatever launcher started `stagescope run`.
  spec.extraEnv.push_back("STAGESCOPE_RUN_ID=" + fs::path(out).stem().string());
  spec.hangGraceSeconds = std::min(10.0, cfg.timeoutSeconds + 2);
  engine::LaunchResult launched = engine::launchRanks(spec);
  // The ranks are gone: a second Ctrl-C (or the terminal's SIGHUP) must not leave the run
  // unmerged and "running".
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN);
  Outcome outcome = outcomeOf(launched);

  storage::MergeResult merged;
  try {
    merged = mergeWithProgress(out, storage::findShards(out));
  } catch (const std::exception& e) {
    merged.failed = 1;
    merged.notes.push_back(oneLine(e));
  }
  for (const auto& note : merged.notes) std::fprintf(stderr, "merge: %s\n", note.c_str());
  try {
    recordRankExits(out, launched);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "merge: how the ranks ended was not recorded: %s\n", oneLine(e).c_str());
  }
  if (!merged.ok() && outcome.status == events::RunStatus::Completed) {
    // The records are in the shards: a later `stagescope merge` finishes the run file.
    outcome = {events::RunStatus::Failed,
               "the ranks completed but their shards were not all merged (" + merged.notes.front() +
                   "); fix the cause and run `stagescope merge " + out + "`"};
  }
  if (outcome.status == events::RunStatus::Hung) {
    // The wait-for graph goes to the terminal and, as "hang" diagnoses, into the run file.
    HangAnalysis hang = analyzeHang(out);
    std::printf("stagescope: %s\n", hang.text.c_str());
    std::fflush(stdout);
    recordHangDiagnoses(out, hang);
    // The root cause leads (the first rank to time out is usually a bystander of it), then
    // what that rank waited on, from its structured wait record (the backend's error text
    // stays in its timeout diagnosis).
    // One first line: the root cause and who timed out first; every verdict and wait is in the
    // graph printed above and in the run file's "hang" diagnoses.
    // No rank waited inside the schedule (a start-up wait ran out): the first rank's own words
    // say which.
    if (!hang.waitSentence.empty()) {
      outcome.reason =
          (hang.headline.empty() ? "" : hang.headline + "; ") +
          (outcome.firstRank >= 0 ? "first to time out: rank " + std::to_string(outcome.firstRank)
                                  : outcome.reason);
      outcome.remedy = hang.remedy;
    }
    if (hang.erroredRank >= 0) {  // an error is the cause; the timeouts are its consequence
      outcome.status = events::RunStatus::Failed;
      outcome.reason = "rank " + std::to_string(hang.erroredRank) + " failed: " + hang.error +
                       "; then ranks timed out: " + hang.verdict;
    }
  }
  recordStatus(out, outcome.status, outcome.reason);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGHUP, SIG_DFL);
  return outcome;
}

// The config with each --fault appended as one more [[faults]] table, validated together.
plan::RunConfig loadWithFaults(const std::string& path, const std::vector<std::string>& overrides,
                               const std::vector<std::string>& faults) {
  plan::RunConfig base = plan::loadConfig(path, overrides);
  if (faults.empty()) return base;
  // Each flag's numbers are checked against the config it is added to (their valid ranges).
  std::string extra;
  for (const auto& f : faults) extra += faultFlagToToml(f, base);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw plan::ConfigError("",
                            path + ": cannot open the config file (missing or not a regular file)");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return plan::parseConfig(text.str() + "\n" + extra, path, overrides);
}

}  // namespace

int runCommand(const RunOptions& opts) {
  // The run outlives its output: when whatever reads the launcher's output goes away
  // (`stagescope run ... | head -n 1`), a write fails with EPIPE and is dropped instead of a
  // SIGPIPE killing the launcher and leaving the run "running" with a stale lock. The ranks'
  // output reaches the launcher through pipes of its own and is drained as before.
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> overrides = opts.overrides;
  if (!opts.record.empty()) overrides.push_back("record.level=\"" + opts.record + "\"");
  plan::RunConfig cfg;
  try {
    cfg = loadWithFaults(opts.config, overrides, opts.faults);
    checkDeviceAvailable(cfg, opts.config);
    plan::Topology topology(cfg);
    const plan::Plan thePlan = plan::makePlan(cfg, topology);
    const std::string stuck = plan::checkPlanProgress(thePlan);
    if (!stuck.empty()) {
      std::fprintf(stderr, "error: %s: the 1F1B plan cannot make progress:\n%s\n",
                   events::printableLine(opts.config).c_str(), stuck.c_str());
      return kExitConfig;
    }
    // Before any file or process exists: a run the machine cannot hold is refused in one line.
    const std::string tooBig =
        plan::memoryRefusal(plan::estimateMemory(cfg, thePlan, plan::forkedRanksFor(cfg)),
                            plan::availableMemoryBytes());
    if (!tooBig.empty() && !opts.force) {
      std::fprintf(stderr, "error: %s\n",
                   events::printableLine(opts.config + ": " + tooBig).c_str());
      return kExitConfig;
    }
  } catch (const plan::ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", oneLine(e).c_str());
    return kExitConfig;
  } catch (const FaultFlagError& e) {
    std::fprintf(stderr, "error: %s\n", oneLine(e).c_str());
    return kExitConfig;
  }
  if (opts.repeat < 1) {
    throw UsageError("--repeat " + std::to_string(opts.repeat) +
                     ": expected a number of runs >= 1");
  }
  // Every output is checked before the first rank starts: a refused path changes nothing.
  std::vector<std::string> outs;
  const std::string base = opts.out.empty() ? defaultOut(opts.config) : opts.out;
  for (int rep = 0; rep < opts.repeat; ++rep) {
    outs.push_back(opts.repeat > 1 ? repetitionPath(base, rep) : base);
    storage::RunFileLock::throwIfHeld(outs.back());
    storage::checkRunOutput(outs.back(), {opts.config}, opts.force);
  }
  int code = 0;
  for (const auto& out : outs) {
    storage::createParentDirectories(out);
    // One writer per run file, from before its first byte to the status after the merge.
    const storage::RunFileLock lock = storage::RunFileLock::acquire(out);
    // Decided again under the lock: another run may have written `out` meanwhile.
    for (const auto& old : storage::checkRunOutput(out, {opts.config}, opts.force).replace) {
      fs::remove(old);
    }
    const ResolvedConfig resolved(cfg.text);
    std::printf("stagescope: %d ranks, %d iterations x %d microbatches, record %s -> %s\n",
                cfg.worldSize, cfg.iterations, cfg.microbatches, events::toString(cfg.record.level),
                events::printableLine(out).c_str());
    std::fflush(stdout);
    Outcome outcome = launchOnce(cfg, resolved.path(), out, opts.quiet);
    if (opts.reference && outcome.status == events::RunStatus::Completed) {
      recordReference(cfg, out);
    }
    // A completed run is one file: its shards are in it. Anything else keeps them, so that a
    // later `stagescope merge` can recover what the run file lacks.
    if (outcome.status == events::RunStatus::Completed && !opts.keepShards) {
      removeShardsOfCompletedRun(out);
    }
    std::printf("stagescope: run %s%s%s\n", events::toString(outcome.status),
                outcome.reason.empty() ? "" : ": ", outcome.reason.c_str());
    if (!outcome.remedy.empty()) std::printf("stagescope: %s\n", outcome.remedy.c_str());
    std::printf("stagescope: run file %s\n", events::printableLine(out).c_str());
    if (outcome.status != events::RunStatus::Completed) {
      code = outcome.corrupt ? kExitCorruptTransfer : exitCodeFor(outcome.status);
    }
  }
  if (opts.check || opts.repeat > 1) {
    int checked = checkRunFile(outs.front(), opts.repeat > 1 ? outs.back() : "", {});
    // The lowest non-zero code wins (docs/commands.md "Exit codes (every command)": causes
    // before consequences).
    if (code == 0 || (checked != 0 && checked < code)) code = checked;
  }
  return code;
}

}  // namespace stagescope::app
