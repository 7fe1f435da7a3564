#include "app/report/TextFile.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace stagescope::report {
namespace {

// The temporary file being written (one at a time per process), for the signal handler:
// a fixed buffer, as only async-signal-safe calls may use it.
char gTemp[4096];
volatile std::sig_atomic_t gHaveTemp = 0;
struct sigaction gPrevious[3];
constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

void removeTempAndDie(int sig) {
  if (gHaveTemp) ::unlink(gTemp);
  gHaveTemp = 0;
  std::signal(sig, SIG_DFL);
  ::raise(sig);  // the usual death by this signal (exit status 128 + sig)
}

void watchSignals(const std::string& temp) {
  if (temp.size() >= sizeof gTemp) return;  // too long to remember: a signal may leave it
  std::memcpy(gTemp, temp.c_str(), temp.size() + 1);
  gHaveTemp = 1;
  struct sigaction sa {};
  sa.sa_handler = removeTempAndDie;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &gPrevious[i]);
}

void unwatchSignals() {
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &gPrevious[i], nullptr);
  gHaveTemp = 0;
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  const std::filesystem::path p(path_);
  temp_ = (p.parent_path() / ("." + p.filename().string() + ".tmp-" + std::to_string(::getpid())))
              .string();
  const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    temp_.clear();  // not ours: never removed
    fail(err, "could not create a temporary file next to it");
  }
  f_ = ::fdopen(fd, "wb");
  if (!f_) {
    const int err = errno;
    ::close(fd);
    ::unlink(temp_.c_str());
    temp_.clear();
    fail(err, "could not open the temporary file");
  }
  watchSignals(temp_);
}

AtomicFile::~AtomicFile() {
  if (f_) std::fclose(f_);
  if (!committed_ && !temp_.empty()) {
    ::unlink(temp_.c_str());
    unwatchSignals();
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
  if (::rename(temp_.c_str(), path_.c_str()) != 0) fail(errno, "could not replace it");
  committed_ = true;
  unwatchSignals();
}

void writeTextFile(const std::string& path, const std::string& text) {
  AtomicFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace stagescope::report
