#include "app/capture/RecordingWork.h"

#include <exception>

namespace stagescope::capture {

RecordingWork::RecordingWork(c10::intrusive_ptr<c10d::Work> inner, OnDone onDone,
                             HangWatchdog* watchdog, uint64_t watchId)
    : c10d::Work(-1, inner->retrieveOpType()),
      inner_(std::move(inner)),
      onDone_(std::move(onDone)),
      watchdog_(watchdog),
      watchId_(watchId) {}

RecordingWork::~RecordingWork() {
  if (reported_.load()) return;
  bool ok = false;
  try {
    ok = inner_->isCompleted() && inner_->isSuccess();
  } catch (...) {
    ok = false;
  }
  done(ok, false, ok ? "" : "the job dropped the operation before it completed");
}

void RecordingWork::done(bool ok, bool waited, const std::string& error) {
  if (reported_.exchange(true)) return;
  try {
    onDone_(ok, waited, error);
  } catch (...) {
    // recording must never change what the job sees
  }
}

bool RecordingWork::isCompleted() {
  return inner_->isCompleted();
}
bool RecordingWork::isSuccess() const {
  return inner_->isSuccess();
}
std::exception_ptr RecordingWork::exception() const {
  return inner_->exception();
}
int RecordingWork::sourceRank() const {
  return inner_->sourceRank();
}
std::vector<at::Tensor> RecordingWork::result() {
  return inner_->result();
}
void RecordingWork::synchronize() {
  inner_->synchronize();
}

bool RecordingWork::wait(std::chrono::milliseconds timeout) {
  bool ok = false;
  if (watchdog_) watchdog_->blocked(watchId_, true);
  try {
    ok = inner_->wait(timeout);
  } catch (const std::exception& e) {
    if (watchdog_) watchdog_->blocked(watchId_, false);
    done(false, true, e.what());
    throw;
  } catch (...) {
    if (watchdog_) watchdog_->blocked(watchId_, false);
    done(false, true, "unknown exception");
    throw;
  }
  if (watchdog_) watchdog_->blocked(watchId_, false);
  done(ok, true, ok ? "" : "wait returned false");
  return ok;
}

void RecordingWork::blockCurrentStream() {
  inner_->blockCurrentStream();
}
void RecordingWork::abort() {
  inner_->abort();
}
c10::intrusive_ptr<c10::ivalue::Future> RecordingWork::getFuture() {
  return inner_->getFuture();
}
c10::intrusive_ptr<c10::ivalue::Future> RecordingWork::getFutureResult() {
  return inner_->getFutureResult();
}
float RecordingWork::getDuration() const {
  return inner_->getDuration();
}
uint64_t RecordingWork::getSequencenumber() const {
  return inner_->getSequencenumber();
}

}  // namespace stagescope::capture
