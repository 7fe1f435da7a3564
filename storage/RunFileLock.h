// One writer per run file: an exclusive lock held by `run` from before the run file's first
// byte until its status is written after the merge, and by `merge` while it merges.
//
// The lock is flock(2) on "<run>.lock", a small text file naming the holder
// ("stagescope lock: pid PID on HOST").  A second writer fails at once (no waiting) with
// RunFileBusy naming that pid and host.  The lock dies with its holder (flock is released by
// the kernel when the process exits, even on SIGKILL); a lock file left behind by a dead
// holder is taken over.  The lock file is removed on release.  A file at "<run>.lock" that is
// not a stagescope lock file is never written: acquiring fails with OutputRefused instead.
#pragma once

#include <stdexcept>
#include <string>

namespace stagescope::storage {

// Another live process holds the lock.  what(): "RUN is being written by stagescope pid P on
// host H (lock RUN.lock); wait for it to finish or choose another -o".
class RunFileBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RunFileLock {
 public:
  // Takes the lock of `runPath` or throws RunFileBusy / OutputRefused / std::runtime_error
  // (the lock file cannot be created: the message names it and the system's reason).
  static RunFileLock acquire(const std::string& runPath);
  RunFileLock(RunFileLock&& other) noexcept;
  RunFileLock& operator=(RunFileLock&&) = delete;
  RunFileLock(const RunFileLock&) = delete;
  ~RunFileLock();  // removes the lock file, then releases the lock

  // Throws RunFileBusy when a live process holds the lock of `runPath`; creates nothing.
  // Called before the output checks, so that a second run on the same path is told who
  // writes it rather than that a run file exists.
  static void throwIfHeld(const std::string& runPath);
  // Who holds the lock of `runPath` now ("stagescope pid P on host H", or "another stagescope
  // (its lock file does not say which)"), or "" when nobody does.  Takes no lock and creates
  // nothing: asked of the kernel's lock table (RunLiveness.h).
  static std::string holderOf(const std::string& runPath);

  static std::string lockPathFor(const std::string& runPath);  // "<run>.lock"

 private:
  RunFileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

}  // namespace stagescope::storage
