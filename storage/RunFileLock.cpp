#include "storage/RunFileLock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "storage/OutputPolicy.h"

namespace stagescope::storage {
namespace {

constexpr const char* kTag = "stagescope lock: ";

std::string readAll(int fd) {
  std::string text;
  char buf[512];
  off_t at = 0;
  for (ssize_t n; (n = ::pread(fd, buf, sizeof buf, at)) > 0 && text.size() < 4096; at += n) {
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

std::string hostName() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string systemError(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// Whether /proc/locks lists an flock(2) lock on the file `st` describes
// ("1: FLOCK  ADVISORY  WRITE 4242 08:01:131090 0 EOF").
bool flockHeld(const struct stat& st) {
  char id[64];
  std::snprintf(id, sizeof id, "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    if (w.size() >= 6 && w[1] == "FLOCK" && w[5] == id) return true;
  }
  return false;
}

// "stagescope pid P on host H", from the lock file's text.
std::string holderName(const std::string& holder) {
  if (holder.rfind(kTag, 0) != 0) return "another stagescope (its lock file does not say which)";
  std::string who = "stagescope ";
  who.append(holder, std::strlen(kTag), holder.find('\n') - std::strlen(kTag));
  return who;
}

RunFileBusy busy(const std::string& runPath, const std::string& lockPath,
                 const std::string& holder) {
  return RunFileBusy(runPath + ": being written by " + holderName(holder) + " (lock " + lockPath +
                     "); wait for it to finish or choose another -o");
}

}  // namespace

std::string RunFileLock::holderOf(const std::string& runPath) {
  const std::string path = lockPathFor(runPath);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return "";  // no lock file: nobody holds it (or acquire will say why)
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const std::string holder = regular ? readAll(fd) : "";
  ::close(fd);
  // Asked of the kernel's lock table rather than by taking a lock, which could make a run
  // that is acquiring at this very moment fail.
  return regular && flockHeld(st) ? holderName(holder) : "";
}

void RunFileLock::throwIfHeld(const std::string& runPath) {
  if (const std::string who = holderOf(runPath); !who.empty()) {
    throw RunFileBusy(runPath + ": being written by " + who + " (lock " + lockPathFor(runPath) +
                      "); wait for it to finish or choose another -o");
  }
}

std::string RunFileLock::lockPathFor(const std::string& runPath) {
  return runPath + ".lock";
}

RunFileLock RunFileLock::acquire(const std::string& runPath) {
  const std::string path = lockPathFor(runPath);
  // A releasing holder unlinks the file it locked: retry when we locked an unlinked file.
  for (int attempt = 0; attempt < 16; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      throw std::runtime_error(systemError(path + ": cannot create the lock file of " + runPath));
    }
    struct stat opened {};
    if (::fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode)) {
      ::close(fd);
      throw OutputRefused(path + ": exists and is not a regular file; expected no file there (" +
                          "stagescope keeps the lock of " + runPath + " in it)");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string holder = readAll(fd);
      ::close(fd);
      if (err != EWOULDBLOCK) {
        errno = err;
        throw std::runtime_error(systemError(path + ": cannot lock"));
      }
      throw busy(runPath, path, holder);
    }
    struct stat now {};
    if (::stat(path.c_str(), &now) != 0 || now.st_ino != opened.st_ino ||
        now.st_dev != opened.st_dev) {
      ::close(fd);  // locked a file its holder removed: try the one at the path now
      continue;
    }
    const std::string before = readAll(fd);
    if (!before.empty() && before.rfind(kTag, 0) != 0) {
      ::close(fd);
      throw OutputRefused(path + ": exists and is not a stagescope lock file; expected no file " +
                          "there (stagescope keeps the lock of " + runPath + " in it)");
    }
    std::string text = kTag;
    text.append("pid ").append(std::to_string(::getpid()));
    text.append(" on host ").append(hostName()).append("\n");
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      const std::string why = systemError(path + ": cannot write the lock file");
      ::unlink(path.c_str());
      ::close(fd);
      throw std::runtime_error(why);
    }
    return RunFileLock(path, fd);
  }
  throw std::runtime_error(path + ": the lock file of " + runPath +
                           " keeps being replaced; another stagescope is starting and stopping "
                           "on the same run file");
}

RunFileLock::RunFileLock(RunFileLock&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

RunFileLock::~RunFileLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: a waiting acquirer then sees a new file
  ::close(fd_);
}

}  // namespace stagescope::storage
