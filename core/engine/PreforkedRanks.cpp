#include "core/engine/PreforkedRanks.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace stagescope::engine {
namespace {

// What execve would close: every descriptor >= 3 marked close-on-exec (the launcher's run-file
// lock, SQLite handles, the other ranks' pipes, all created with O_CLOEXEC).
void closeCloseOnExecFds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  std::vector<int> fds;
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (fd >= 3 && fd != dirfd(d)) fds.push_back(fd);
  }
  closedir(d);
  for (int fd : fds) {
    const int flags = fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC)) close(fd);
  }
}

// Reads NUL-terminated strings from fd 0 up to an empty one; false on EOF before it.
bool readEnvironment(std::vector<std::string>* env) {
  std::string buf;
  char tmp[4096];
  for (;;) {
    size_t start = 0, nul;
    while ((nul = buf.find('\0', start)) != std::string::npos) {
      if (nul == start) return true;  // the empty string ends the block
      env->push_back(buf.substr(start, nul - start));
      start = nul + 1;
    }
    buf.erase(0, start);
    const ssize_t n = read(0, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(tmp, static_cast<size_t>(n));
  }
}

[[noreturn]] void runChild(pid_t parent, int go, int out, int err,
                           const std::function<int()>& worker) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);   // never outlive the launcher
  if (getppid() != parent) _exit(1);  // it died before the line above took effect
  setpgid(0, 0);                      // Ctrl-C goes to the launcher, which stops us
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  // A write to a peer that died is an error the rank reports (EPIPE), not a signal that kills
  // it: otherwise a survivor dies of SIGPIPE and is taken for the rank that was killed.
  signal(SIGPIPE, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  dup2(go, 0);
  dup2(out, 1);
  dup2(err, 2);
  closeCloseOnExecFds();
  std::vector<std::string> env;
  if (!readEnvironment(&env)) _exit(0);  // never released: the launch did not happen
  const int devNull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devNull >= 0) dup2(devNull, 0);  // dup2 clears close-on-exec on fd 0
  clearenv();
  for (auto& kv : env) putenv(strdup(kv.c_str()));  // putenv keeps the pointer: never freed
  int code = 1;
  try {
    code = worker();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "error: the rank stopped on an unknown exception\n");
  }
  std::fflush(nullptr);
  _exit(code);  // not exit(): the launcher's static destructors and atexit handlers are not ours
}

}  // namespace

int threadCount() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

std::unique_ptr<PreforkedRanks> PreforkedRanks::prefork(int worldSize,
                                                        std::function<int()> worker) {
  const char* mode = std::getenv("STAGESCOPE_EXEC_RANKS");
  if ((mode && std::strcmp(mode, "1") == 0) || threadCount() != 1) return nullptr;
  std::unique_ptr<PreforkedRanks> pool(new PreforkedRanks());
  std::fflush(nullptr);  // or the children would print the launcher's buffered output again
  const pid_t parent = getpid();
  for (int r = 0; r < worldSize; ++r) {
    int go[2], out[2], err[2];
    if (pipe2(go, O_CLOEXEC) != 0) throw std::runtime_error("pipe() failed");
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      close(go[0]);
      close(go[1]);
      throw std::runtime_error("pipe() failed");
    }
    const pid_t pid = fork();
    if (pid < 0) {
      for (int fd : {go[0], go[1], out[0], out[1], err[0], err[1]}) close(fd);
      throw std::runtime_error("fork() failed for rank " + std::to_string(r) + ": " +
                               std::strerror(errno));
    }
    if (pid == 0) runChild(parent, go[0], out[1], err[1], worker);
    close(go[0]);
    close(out[1]);
    close(err[1]);
    pool->ranks_.push_back({pid, go[1], out[0], err[0]});
    pool->released_.push_back(false);
  }
  return pool;
}

PreforkedRank PreforkedRanks::release(int rank, const std::vector<std::string>& env) {
  PreforkedRank& r = ranks_.at(rank);
  std::string block;
  for (const auto& kv : env) block.append(kv).push_back('\0');
  block.push_back('\0');
  const sighandler_t old = signal(SIGPIPE, SIG_IGN);  // a dead child is an error, not a signal
  size_t done = 0;
  while (done < block.size()) {
    const ssize_t n = write(r.go, block.data() + done, block.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  signal(SIGPIPE, old);
  close(r.go);
  r.go = -1;
  released_.at(rank) = true;
  if (done < block.size()) {
    throw std::runtime_error("rank " + std::to_string(rank) +
                             "'s preforked process is gone before its launch");
  }
  return r;
}

PreforkedRanks::~PreforkedRanks() {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (released_[i]) continue;
    PreforkedRank& r = ranks_[i];
    if (r.go >= 0) close(r.go);  // EOF: the child exits without running anything
    close(r.out);
    close(r.err);
    int status = 0;
    while (waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace stagescope::engine
