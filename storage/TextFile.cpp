#include "storage/TextFile.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace stagescope::report {
namespace {

// The temporary file of the AtomicFile being written (one at a time per process), for the
// signal handler: a fixed buffer and a lock-free state, as only async-signal-safe code may use
// them.  The state is Busy while the owning thread creates, renames or removes the file; that
// thread blocks SIGINT/SIGTERM/SIGHUP meanwhile, so a handler that sees Busy runs on another
// thread and waits the few microseconds until the file system call is done.
enum TempState : int { kNone = 0, kBusy = 1, kCreated = 2 };
char gTemp[4096];
std::atomic<int> gState{kNone};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads gState");
constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction gPrevious[3];
volatile std::sig_atomic_t gWatched[3] = {0, 0, 0};  // our handler replaced gPrevious[i]

void restorePrevious() {
  for (int i = 0; i < 3; ++i) {
    if (gWatched[i]) ::sigaction(kSignals[i], &gPrevious[i], nullptr);
    gWatched[i] = 0;
  }
}

// Removes the temporary file, puts back what the signal did before (normally the default: the
// process dies of it, exit status 128 + sig; a handler of the program's own runs next), and
// sends the signal again (blocked until this handler returns).
void removeTempAndResignal(int sig) {
  const int savedErrno = errno;
  int state;
  while ((state = gState.load()) == kBusy) {
  }
  if (state == kCreated) ::unlink(gTemp);
  gState.store(kNone);
  restorePrevious();
  ::raise(sig);
  errno = savedErrno;
}

// Our handler for each of the three signals the process does not ignore (an ignored signal
// cannot interrupt the write).  All three are blocked while it runs.
void watchSignals() {
  struct sigaction sa {};
  sa.sa_handler = removeTempAndResignal;
  sigemptyset(&sa.sa_mask);
  for (int s : kSignals) sigaddset(&sa.sa_mask, s);
  for (int i = 0; i < 3; ++i) {
    ::sigaction(kSignals[i], nullptr, &gPrevious[i]);
    if (gPrevious[i].sa_handler == SIG_IGN && !(gPrevious[i].sa_flags & SA_SIGINFO)) continue;
    gWatched[i] = 1;
    ::sigaction(kSignals[i], &sa, nullptr);
  }
}

// SIGINT/SIGTERM/SIGHUP held back on this thread for the object's lifetime; one that arrives
// meanwhile is delivered when it ends.
class SignalsHeld {
 public:
  SignalsHeld() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : kSignals) sigaddset(&set, s);
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalsHeld() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t old_;
};

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  const std::filesystem::path p(path_);
  const std::string temp =
      (p.parent_path() / ("." + p.filename().string() + ".tmp-" + std::to_string(::getpid())))
          .string();
  if (temp.size() >= sizeof gTemp)
    fail(ENAMETOOLONG, "could not create a temporary file next to it");
  // From before the file exists until the handler that removes it is in place, the signals
  // wait: there is no moment at which a signal leaves the file behind.
  SignalsHeld held;
  if (gState.load() != kNone) {
    throw std::logic_error("cannot write '" + path_ + "': another report is being written");
  }
  std::memcpy(gTemp, temp.c_str(), temp.size() + 1);
  gState.store(kBusy);
  watchSignals();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;  // not ours: never removed
    gState.store(kNone);
    restorePrevious();
    fail(err, "could not create a temporary file next to it");
  }
  f_ = ::fdopen(fd, "wb");
  if (!f_) {
    const int err = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    gState.store(kNone);
    restorePrevious();
    fail(err, "could not open the temporary file");
  }
  temp_ = temp;
  gState.store(kCreated);
}  // a signal that came meanwhile is handled here: the file is removed, the process dies of it

AtomicFile::~AtomicFile() {
  if (f_) std::fclose(f_);
  if (!committed_ && !temp_.empty()) {
    SignalsHeld held;
    gState.store(kBusy);
    ::unlink(temp_.c_str());
    gState.store(kNone);
    restorePrevious();
  }
}

void AtomicFile::fail(int err, const char* what) {
  std::string reason = std::strerror(err);
  if (err == EFBIG || err == ENOSPC || err == EDQUOT)
    reason += " (the disk is full or a size limit was reached)";
  throw std::runtime_error("cannot write '" + path_ + "': " + what + ": " + reason + "; " + path_ +
                           " was not changed");
}

void AtomicFile::write(const char* data, size_t size) {
  if (size != 0 && std::fwrite(data, 1, size, f_) != size) fail(errno, "write failed");
}

void AtomicFile::commit() {
  if (std::fflush(f_) != 0) fail(errno, "write failed");
  if (::fsync(::fileno(f_)) != 0 && errno != EINVAL) fail(errno, "write failed");
  std::FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0) fail(errno, "close failed");
  // The rename and forgetting the file are one step for a signal: before it, the handler
  // removes the temporary file (`path` unchanged); after it, `path` is the complete report.
  SignalsHeld held;
  gState.store(kBusy);
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    gState.store(kCreated);  // the destructor removes it
    fail(err, "could not replace it");
  }
  committed_ = true;
  gState.store(kNone);
  restorePrevious();
}

void writeTextFile(const std::string& path, const std::string& text) {
  if (isStandardOutput(path)) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      throw std::runtime_error(std::string("cannot write the report to standard output: ") +
                               std::strerror(errno));
    return;
  }
  AtomicFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace stagescope::report
