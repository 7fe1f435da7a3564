#include "app/WorkerLiveness.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <mutex>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "core/engine/ElasticErrorFile.h"
#include "core/engine/Launcher.h"
#include "core/engine/ProcessGroups.h"
#include "core/events/Printable.h"

namespace stagescope::app {
namespace {

std::atomic<bool> gFinishing{false};

// The signal being handled, for the SIGALRM fallback below.
volatile std::sig_atomic_t gPendingSignal = 0;
// Set once this rank has written everything and only keeps the store up for its peers.
volatile std::sig_atomic_t gLingering = 0;

// SIGTERM/SIGINT/SIGHUP: the heartbeat thread records who stopped first, then dies of the same
// signal.  A second signal, or the alarm when that takes longer than kSignalBoundSeconds (a
// store that stopped answering), ends the process at once with the original signal.
constexpr unsigned kSignalBoundSeconds = 15;

extern "C" void onAlarm(int) {
  std::signal(gPendingSignal ? gPendingSignal : SIGTERM, SIG_DFL);
  std::raise(gPendingSignal ? gPendingSignal : SIGTERM);
}

extern "C" void onTerminate(int sig) {
  if (gPendingSignal || gLingering) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  gPendingSignal = sig;
  engine::Liveness::notifySignal(sig);
  alarm(kSignalBoundSeconds);
}

std::string actionName(const plan::RankPlan& me, int seq) {
  if (seq < 0 || seq >= static_cast<int>(me.actions.size())) return "action " + std::to_string(seq);
  return "action " + std::to_string(seq) + " " + events::toString(me.actions[seq].kind);
}

std::mutex gProgressMu;  // guards the WaitState pointer against the executor's destruction

}  // namespace

WorkerLiveness::WorkerLiveness(const engine::RankEnv& env, std::chrono::milliseconds timeout,
                               storage::ShardWriter& recorder, const plan::RankPlan& me)
    : rank_(env.rank),
      hostsStore_(env.hostsStore()),
      timeout_(timeout),
      recorder_(recorder),
      me_(me) {
  // Its own connection: heartbeats must not queue behind the rank's other store traffic.
  c10::intrusive_ptr<c10d::Store> store =
      engine::connectStore(env.masterAddr, env.masterPort, false, env.worldSize, timeout);
  if (env.agentHostsStore) {
    store = c10::make_intrusive<c10d::PrefixStore>(
        "stagescope/attempt_" + std::to_string(env.restartCount), store);
  }
  engine::Liveness::Options opts;
  opts.storeHost = env.launcherHostsStore || env.agentHostsStore ? -1 : 0;
  // A waiting rank gives up on a silent peer elsewhere after a third of its timeout, at least
  // 5 s and at most 30 s (a peer gone from this machine: at once).
  opts.watchSilentAfter =
      std::clamp(timeout / 3, std::chrono::milliseconds(5000), std::chrono::milliseconds(30000));
  live_ = std::make_unique<engine::Liveness>(
      store, env.rank, env.worldSize, [this] { return lastAction(); }, opts);
  live_->start();
}

WorkerLiveness::~WorkerLiveness() {
  if (signalsArmed_) {
    std::signal(SIGTERM, SIG_DFL);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGHUP, SIG_DFL);
  }
  live_.reset();
}

void WorkerLiveness::end(const std::string& how) {
  live_->end(how);
  if (!hostsStore_) return;
  // Everything of this rank is written (callers end last): while it keeps the store up for its
  // peers, a signal ends the process at once.
  gLingering = 1;
  live_->awaitPeers(timeout_ + std::chrono::seconds(10));
}

void WorkerLiveness::attach(const engine::WaitState* progress) {
  std::lock_guard<std::mutex> lk(gProgressMu);
  const engine::WaitState* before = progress_;
  if (before && !progress && before->iteration >= 0) {
    detachedAt_ = "after its last action (iteration " + std::to_string(before->iteration.load()) +
                  ", " + actionName(me_, before->actionSeq.load()) + ")";
  }
  progress_ = progress;
}

std::string WorkerLiveness::lastAction() const {
  std::lock_guard<std::mutex> lk(gProgressMu);
  const engine::WaitState* p = progress_;
  if (!p && !detachedAt_.empty()) return detachedAt_;
  if (!p || p->iteration < 0) return "before its first action";
  std::string s = "iteration " + std::to_string(p->iteration.load()) + ", " +
                  actionName(me_, p->actionSeq.load());
  const int peer = p->waitingOn.load();
  if (peer >= 0) s += ", waiting on rank " + std::to_string(peer);
  return s;
}

bool WorkerLiveness::claimFinish() {
  return !gFinishing.exchange(true);
}

void WorkerLiveness::announce(const engine::PeerFate& root) {
  const std::string sentence = root.sentence();
  std::fprintf(stderr, "stagescope: rank %d: root cause: %s\n", rank_, sentence.c_str());
  std::fflush(stderr);
  if (root.recordedItself()) return;  // its own shard says why
  events::DiagnosisRecord d;
  d.rank = rank_;
  d.kind = events::DiagnosisKind::PeerDead;
  d.waitsOnRank = root.rank;
  d.message = sentence;
  d.signal = root.signal();  // the peer's, as the sentence names it (0: not known)
  recorder_.diagnosis(std::move(d));
}

std::string WorkerLiveness::reportRootCause() {
  const engine::LivenessReport report = live_->observe();
  const engine::PeerFate* root = report.rootCause();
  if (!root) return "";
  announce(*root);
  return root->sentence();
}

void WorkerLiveness::arm(const engine::RankEnv& env, double timeoutSeconds) {
  const std::string errorFile = env.errorFile;
  live_->watch(
      [this] {
        std::lock_guard<std::mutex> lk(gProgressMu);
        const engine::WaitState* p = progress_;
        return p ? p->waitingOn.load() : -1;
      },
      [this, timeoutSeconds, errorFile](const engine::PeerFate& f) {
        onPeerDead(f, timeoutSeconds, errorFile);
      });
  // Our launcher supervises its ranks itself (waitpid names every signal): keep its contract.
  if (env.launcherHostsStore) return;
  live_->onSignal([this, errorFile](int sig) { onSignal(sig, errorFile); });
  struct sigaction sa {};
  sa.sa_handler = onTerminate;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  struct sigaction al {};
  al.sa_handler = onAlarm;
  sigemptyset(&al.sa_mask);
  sigaction(SIGALRM, &al, nullptr);
  signalsArmed_ = true;
}

// On the heartbeat thread: the peer this rank waits on is gone or silent, so the wait can only
// end by its timeout.  Say why now and stop, as a rank that lost its peer (a consequence).
void WorkerLiveness::onPeerDead(const engine::PeerFate& fate, double timeoutSeconds,
                                const std::string& errorFile) {
  if (!claimFinish()) return;
  announce(fate);
  char waited[32];
  std::snprintf(waited, sizeof waited, "%g", timeoutSeconds);
  const std::string message =
      "rank " + std::to_string(rank_) + " waits on rank " + std::to_string(fate.rank) + " (" +
      lastAction() + "), which stopped heartbeating: gave up before timeout_seconds = " + waited;
  std::fprintf(stderr, "error: rank %d: %s\n", rank_, events::printableLine(message).c_str());
  std::fflush(stderr);
  events::DiagnosisRecord d;
  d.rank = rank_;
  d.kind = events::DiagnosisKind::PeerLost;
  d.waitsOnRank = fate.rank;
  d.message = message;
  recorder_.diagnosis(std::move(d));
  try {
    recorder_.flush();
  } catch (const std::exception&) {
  }
  engine::writeElasticErrorFile(errorFile, "rank " + std::to_string(rank_) +
                                               ": root cause: " + fate.sentence() + "; " + message);
  end("waited " + message);  // last: the store's host waits for its peers
  std::_Exit(engine::kWorkerTimeout);
}

// On the heartbeat thread, after SIGTERM/SIGINT/SIGHUP: a launcher stopping the ranks after
// another one failed (a consequence), or a signal nobody explains (this rank is the cause).
void WorkerLiveness::onSignal(int sig, const std::string& errorFile) {
  if (!claimFinish()) return;  // the main thread is finishing; the signal ends it meanwhile
  const engine::LivenessReport report = live_->observe();
  const engine::PeerFate* root = report.rootCause();
  const std::string how = "signal " + std::to_string(sig) + " (" + engine::signalName(sig) + ")";
  events::DiagnosisRecord d;
  d.rank = rank_;
  d.signal = sig;  // it ends this rank: raised again below
  if (root) {
    announce(*root);
    d.kind = events::DiagnosisKind::RankStopped;
    d.waitsOnRank = root->rank;
    d.message =
        "stopped by " + how + " after rank " + std::to_string(root->rank) +
        " stopped (a launcher stops the other ranks when one fails); last action: " + lastAction();
  } else {
    d.kind = events::DiagnosisKind::RankKilled;
    d.message = "was terminated by " + how + " while its peers were alive (host " +
                live_->self().host + ", pid " + std::to_string(live_->self().pid) +
                "; last action: " + lastAction() + ")";
  }
  std::fprintf(stderr, "error: rank %d: %s\n", rank_, events::printableLine(d.message).c_str());
  std::fflush(stderr);
  const std::string line = "rank " + std::to_string(rank_) + ": " +
                           (root ? "root cause: " + root->sentence() + "; " : "") + d.message;
  const std::string ending = (root ? "waited " : "killed ") + d.message;
  recorder_.diagnosis(std::move(d));
  try {
    recorder_.flush();
  } catch (const std::exception&) {
  }
  engine::writeElasticErrorFile(errorFile, line);
  end(ending);  // last: the store's host waits for its peers
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace stagescope::app
