// A worker's side of liveness (core/engine/Liveness): it publishes its process and a heartbeat
// in the job's store, and when it stops because of a peer — a wait that timed out, a lost
// connection, a launcher's SIGTERM, or a watched peer that stopped heartbeating — the first
// thing it prints and records is the root cause: which rank stopped, on which host, with which
// pid, when, doing what, and whether its process is gone.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/engine/Communicator.h"
#include "core/engine/Liveness.h"
#include "core/engine/RankEnv.h"
#include "core/plan/Plan.h"
#include "storage/ShardWriter.h"

namespace stagescope::app {

class WorkerLiveness {
 public:
  // Connects its own store client and starts beating; `me` names the actions in heartbeats.
  // Throws engine::StoreTimeout when the store cannot be reached (bounded by `timeout`).
  WorkerLiveness(const engine::RankEnv& env, std::chrono::milliseconds timeout,
                 storage::ShardWriter& recorder, const plan::RankPlan& me);
  ~WorkerLiveness();

  // The executor's progress, read by the heartbeat thread (set once the executor exists).
  void attach(const engine::WaitState* progress);
  // After the groups exist every peer has published its process: remember them (see
  // Liveness::learnPeers).
  void learnPeers() { live_->learnPeers(); }

  // Stops this rank early, with the root cause, when the peer it waits on stops heartbeating
  // (exit code kWorkerTimeout); and, unless our own launcher supervises the ranks, turns
  // SIGTERM/SIGINT/SIGHUP into a recorded end (who stopped first) before dying of the signal.
  void arm(const engine::RankEnv& env, double timeoutSeconds);

  // Exactly one of the main thread and the heartbeat thread finishes the process: false when
  // the other one already does (the caller must then not print or record anything).
  static bool claimFinish();

  // Observes the peers (bounded by Liveness::Options::silentAfter); when one of them is the
  // root cause, prints "stagescope: rank R: root cause: SENTENCE" on stderr, records a
  // `peer_dead` diagnosis (waitsOnRank = that peer) unless the peer recorded its own end, and
  // returns the sentence; "" when every peer is alive or a consequence.
  std::string reportRootCause();

  // Publishes how this rank ended ("completed", "failed <why>", "waited <why>"); call it last,
  // once everything else of the rank is written.  The rank that hosts the store (by hand,
  // Slurm) then keeps it up until its peers have said how they end (at most timeout_seconds +
  // 10 s: every wait of theirs is bounded by the timeout); a signal meanwhile ends it at once.
  void end(const std::string& how);

 private:
  void onPeerDead(const engine::PeerFate& fate, double timeoutSeconds,
                  const std::string& errorFile);
  void onSignal(int sig, const std::string& errorFile);
  std::string lastAction() const;
  void announce(const engine::PeerFate& root);

  int rank_;
  bool hostsStore_;
  std::chrono::milliseconds timeout_;
  storage::ShardWriter& recorder_;
  const plan::RankPlan& me_;
  std::atomic<const engine::WaitState*> progress_{nullptr};
  // What lastAction() said when the executor detached (its run ended or threw): a rank that
  // lingers for its peers after its last action is not "before its first action".
  std::string detachedAt_;  // guarded by the progress mutex
  std::unique_ptr<engine::Liveness> live_;
  bool signalsArmed_ = false;
};

}  // namespace stagescope::app
