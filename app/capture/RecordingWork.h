// RecordingWork: the c10d::Work handed back to the job for a recorded operation.
//
// Contract: it forwards every call (wait, isCompleted, result, getFuture, abort, ...) to the
// inner backend's Work unchanged and returns what the inner Work returns.  Around that it
// calls `onDone` exactly once, when the operation is known to be over:
//   * after the first wait() that returns (ok = true), or that throws / returns false (ok =
//     false, error = the exception text or "wait returned false");
//   * otherwise when the job drops the Work (ok = the inner Work's state at that moment);
// `onDone` runs on the thread that triggers it and must not throw (it only enqueues records).
// With a `watchdog`, every wait() is bracketed by watchdog->blocked(watchId, true/false), so
// the hang watchdog knows which operation the job is blocked on.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "app/capture/HangWatchdog.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

namespace stagescope::capture {

class RecordingWork final : public c10d::Work {
 public:
  using OnDone = std::function<void(bool ok, bool waited, const std::string& error)>;
  RecordingWork(c10::intrusive_ptr<c10d::Work> inner, OnDone onDone,
                HangWatchdog* watchdog = nullptr, uint64_t watchId = 0);
  ~RecordingWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout) override;
  void blockCurrentStream() override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFutureResult() override;
  float getDuration() const override;
  uint64_t getSequencenumber() const override;

 private:
  void done(bool ok, bool waited, const std::string& error);

  c10::intrusive_ptr<c10d::Work> inner_;
  OnDone onDone_;
  HangWatchdog* watchdog_;
  uint64_t watchId_;
  std::atomic<bool> reported_{false};
};

}  // namespace stagescope::capture
