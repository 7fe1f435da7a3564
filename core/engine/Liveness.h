// Liveness of the ranks of a run, kept in the job's store so that any rank can tell, whatever
// launcher started it (ours, torchrun, Slurm, by hand), which peer died and how.
//
// Every rank publishes, under its own keys:
//   stagescope/live/<rank>/id    its process (ProcessIdentity::encode: pid, start time, machine,
//   host) stagescope/live/<rank>/beat  "<count> <unix ms> <last action>", rewritten every
//   `interval`
//                                by a background thread (one small store write per interval)
//   stagescope/live/<rank>/end   how it ended, written once: "completed", "failed <why>" (it
//                                recorded an error), "killed <why>" (a signal nobody explained),
//                                "waited <why>" (a consequence: timeout, lost or stopped peer)
// A peer is judged by what this machine can see, never by comparing clocks: an `end` record
// says how it ended; a process on this machine (same host, boot and PID namespace) that no
// longer exists is gone (a zombie's wait status names the signal); a process elsewhere whose
// beat count does not change for `silentAfter` of the observer's own time stopped heartbeating.
// Every store wait is bounded; a store that stops answering is reported, not waited on.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/engine/ProcessLiveness.h"

namespace stagescope::engine {

struct PeerFate {
  enum class Kind {
    Alive,        // beating, or its process runs on this machine
    Completed,    // ended after its whole plan
    Killed,       // ended by a signal it could not explain ("killed" end record)
    Failed,       // ended on an error it recorded
    Consequence,  // ended waiting on, or stopped after, another rank
    Gone,         // no end record and its process is gone from this machine
    Silent,       // no end record and no heartbeat for `silentAfter` (another machine)
    Unknown,      // never published, or not settled within the observation window
  };
  int rank = -1;
  Kind kind = Kind::Unknown;
  std::optional<ProcessIdentity> id;
  int64_t lastBeatUnixMs = 0;  // the peer's wall clock at its last beat (0: none seen)
  std::string lastAction;      // what it was doing at its last beat
  std::string ended;           // its end record, without the kind word
  ProcessStatus process;       // from /proc, when it ran on this machine
  double silentSeconds = 0;    // Silent: how long the observer saw no beat
  std::string storeLost;       // it hosted the store, which stopped answering with this error

  // A cause rather than a consequence: it stopped without being stopped by another rank.
  bool isCause() const {
    return kind == Kind::Gone || kind == Kind::Silent || kind == Kind::Killed ||
           kind == Kind::Failed;
  }
  bool recordedItself() const { return kind == Kind::Killed || kind == Kind::Failed; }
  // The signal that ended it, as sentence() says it ("killed by signal 9"): its process, gone
  // from this machine, was ended by one; 0 otherwise (exited, alive, elsewhere, not seen).
  // A peer_dead record carries it (DiagnosisRecord::signal).
  int signal() const;
  // "rank 6 (host h, pid p) stopped heartbeating at 2026-12-01 11:52:03.120 UTC (doing at that
  // heartbeat: iteration 1, action 4 F mb 2), process gone: killed by signal 9 (SIGKILL)"
  std::string sentence() const;
};

struct LivenessReport {
  std::vector<PeerFate> peers;
  std::string storeError;  // the store stopped answering (empty when it answered)
  // The root cause among the peers: a rank gone or silent without a record (earliest last
  // beat first, then lowest rank), then one killed by an unexplained signal, then one that
  // recorded an error; nullptr when every peer is alive or a consequence.
  const PeerFate* rootCause() const;
};

class Liveness {
 public:
  struct Options {
    std::chrono::milliseconds interval{500};      // between two beats
    std::chrono::milliseconds silentAfter{5000};  // no beat this long: stopped heartbeating
    // watch(): a peer elsewhere this long without a beat stops this rank early.  Longer than
    // silentAfter: a wrong verdict here would end a healthy run (a starved heartbeat thread).
    std::chrono::milliseconds watchSilentAfter{5000};
    int storeHost = -1;  // the rank that hosts the store (-1: a launcher or agent hosts it)
  };
  // `store` is this rank's own connection (the heartbeat thread must not queue behind the
  // rank's other store traffic); `lastAction` is called on the heartbeat thread and must be
  // cheap and thread-safe (it reads atomics).
  Liveness(c10::intrusive_ptr<c10d::Store> store, int rank, int worldSize,
           std::function<std::string()> lastAction, Options opts);
  Liveness(c10::intrusive_ptr<c10d::Store> store, int rank, int worldSize,
           std::function<std::string()> lastAction)
      : Liveness(std::move(store), rank, worldSize, std::move(lastAction), Options{}) {}
  ~Liveness();  // stop(): the thread is joined if it ends within 2 s, else left detached

  // Publishes the identity and starts beating.
  void start();
  // Publishes how this rank ended ("completed", or "<failed|killed|waited> <why>") and stops
  // beating.  Never throws.
  void end(const std::string& how);
  void stop();

  // Watches, on every beat, the peer this rank currently waits on (`waitingOn()` returns -1
  // when it waits on none).  When that peer is gone or silent without an end record,
  // `onDead` runs once on the heartbeat thread.
  void watch(std::function<int()> waitingOn, std::function<void(const PeerFate&)> onDead);
  // `onSignal(sig)` runs on the heartbeat thread at its next beat after notifySignal(sig)
  // (which is async-signal-safe: it only stores the number).
  void onSignal(std::function<void(int)> handler);
  static void notifySignal(int sig);

  // Reads the peers' identities once (after a collective every peer has published its own),
  // so that a peer can still be looked up in /proc when the store is gone.  Never throws.
  void learnPeers();

  // Settles every peer: end record, /proc on this machine, else whether its beat count moves
  // within `window` (returns as soon as every peer is settled).  Keeps this rank beating
  // meanwhile.  Never throws; a store that fails is reported in storeError, and then, when a
  // rank hosts the store (Options::storeHost), that rank is judged from /proc (Gone) or named
  // as the store host that stopped answering (Silent).
  LivenessReport observe(std::chrono::milliseconds window);
  LivenessReport observe() { return observe(opts_.silentAfter); }

  // Waits until every peer has ended (an end record), is gone from this machine, never beat,
  // or has not beaten for `silentAfter`; at most `limit`.  For the rank that hosts the store:
  // its exit takes the store away, and its peers still need it to say why they stop.
  void awaitPeers(std::chrono::milliseconds limit);

  const ProcessIdentity& self() const;
  const Options& options() const { return opts_; }

  struct State;  // shared with the heartbeat thread (it may outlive this object)

 private:
  std::shared_ptr<State> state_;
  Options opts_;
  std::thread thread_;               // the heartbeat; captures state_, so it may be left detached
  std::shared_future<void> exited_;  // ready when the heartbeat thread has left its loop
};

}  // namespace stagescope::engine
