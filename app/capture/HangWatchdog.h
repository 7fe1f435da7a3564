// HangWatchdog: the operations of a captured process that have not completed yet, and the
// thread that reports the stuck ones while the job is still blocked in them.
//
// Why: a job that hangs is often killed by its launcher (torchrun, Slurm, a CI timeout) long
// before c10d's own timeout fires, and then nothing would say what each rank was waiting on.
// The watchdog writes that evidence — a structured `waits` row (op, group/edge, peer, message
// or collective index, iteration) and a `timeout` diagnosis, flushed at once — as soon as an
// operation has been stuck for the hang timeout, so merge/check build the wait-for graph from
// whatever the ranks left.
//
// Contract:
//   * add() registers an operation when it is posted; done() removes it when its Work is seen
//     complete (or failed) and says whether the watchdog had already reported it.
//   * blocked(id, true/false) brackets a thread's wait() on the operation.
//   * An operation is stuck when a thread has been blocked in its wait() for its timeout; when
//     no operation of the process is blocked in wait() (the job waits by other means, e.g. on
//     a future), an operation pending for its timeout since it was posted is stuck.
//   * Each stuck operation is reported once, on the watchdog thread, through `report`.
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::capture {

struct PendingOp {
  events::WaitRecord wait;  // what a rank stuck in this operation waits for (timeNs unset)
  std::string what;         // the operation in words: "send to rank 1 on pp:stage0->stage1 (...)"
  std::chrono::milliseconds timeout{0};  // how long before it counts as stuck (> 0)
  int64_t postNs = 0;                    // engine::nowNs() at post
  // Runs on the watchdog thread when the operation is reported (e.g. records a collective's
  // row with state "pending"); may be empty; must not throw.
  std::function<void()> onStuck;
};

class HangWatchdog {
 public:
  // `report(wait, what, stuckNs)`: records that the job has waited `stuckNs` on `wait`.
  using Report =
      std::function<void(events::WaitRecord wait, const std::string& what, int64_t stuckNs)>;
  explicit HangWatchdog(Report report);
  ~HangWatchdog();
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  uint64_t add(PendingOp op);
  void blocked(uint64_t id, bool inWait);
  // Removes the operation; true when it had been reported as stuck.
  bool done(uint64_t id);
  // Stops the thread (joins it); later add() calls still register but nothing is reported.
  void stop();
  size_t pending() const;
  // The operations registered and not done, in posting order: what a process that is about to
  // die had posted and never saw complete (CaptureSession::aborted records them).
  std::vector<PendingOp> pendingOps() const;

 private:
  struct Entry {
    PendingOp op;
    int64_t waitStartNs = 0;  // > 0 while a thread is blocked in its wait()
    int waiters = 0;
    bool reported = false;
  };
  void run();
  // The entries stuck at `now` (not yet reported); marks them reported.
  std::vector<Entry> takeStuck(int64_t now);

  Report report_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> ops_;
  uint64_t next_ = 1;
  bool stopping_ = false;
  // The poll period the thread is sleeping in (0 while it is awake and will recompute it).
  std::chrono::milliseconds sleeping_{0};
  std::thread thread_;
};

}  // namespace stagescope::capture
