#include "core/engine/Launcher.h"

#include "core/engine/Clock.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "core/engine/PreforkedRanks.h"
#include "core/engine/QuietProgress.h"

namespace stagescope::engine {
namespace {

volatile std::sig_atomic_t gInterrupted = 0;
void onSignal(int sig) {
  gInterrupted = sig;
}

struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;  // pipe read ends
  std::string outBuf, errBuf;
  bool done = false;
  RankExit exit;
};

// The child's environment: ours, minus the variables we set, plus the rank's.  Built before
// fork(), so the child only calls async-signal-safe functions until execve (the launcher has
// other threads, e.g. the store server, whose locks a forked child must not touch).
std::vector<std::string> rankEnvironment(const LaunchSpec& spec, int rank) {
  std::vector<std::string> mine = {
      "RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
      "WORLD_SIZE=" + std::to_string(spec.worldSize),
      "LOCAL_WORLD_SIZE=" + std::to_string(spec.worldSize), "MASTER_ADDR=" + spec.masterAddr,
      "MASTER_PORT=" + std::to_string(spec.masterPort), "STAGESCOPE_LAUNCHER_STORE=1",
      // Loopback ranks need no DNS; a slow resolver would stall every connection by seconds.
      "RES_OPTIONS=timeout:1 attempts:1"};
  mine.insert(mine.end(), spec.extraEnv.begin(), spec.extraEnv.end());
  auto keyOf = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    bool overridden = false;
    for (const auto& m : mine) overridden = overridden || keyOf(m) == keyOf(kv);
    if (!overridden) env.push_back(kv);
  }
  env.insert(env.end(), mine.begin(), mine.end());
  return env;
}

pid_t spawn(const LaunchSpec& spec, int rank, int* outFd, int* errFd) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) throw std::runtime_error("pipe() failed");
  const std::vector<std::string> env = rankEnvironment(spec, rank);
  std::vector<char*> envp, argv;
  for (const auto& kv : env) envp.push_back(const_cast<char*>(kv.c_str()));
  envp.push_back(nullptr);
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork() failed for rank " + std::to_string(rank));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
    setpgid(0, 0);                     // Ctrl-C goes to the launcher, which stops us
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    execve(argv[0], argv.data(), envp.data());
    static const char kMsg[] = "stagescope: exec of the worker failed\n";
    (void)!write(2, kMsg, sizeof kMsg - 1);
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  *outFd = out[0];
  *errFd = err[0];
  return pid;
}

// Forwards complete lines with the rank prefix (under --quiet only the progress, through
// `progress`); keeps the last stderr line for the summary.
void drain(int fd, std::string& buf, int rank, bool isErr, bool quiet, RankExit& exit, bool* eof,
           QuietProgress& progress) {
  char tmp[4096];
  ssize_t n = read(fd, tmp, sizeof tmp);
  if (n <= 0) {
    *eof = true;
    n = 0;
  }
  buf.append(tmp, static_cast<size_t>(n));
  size_t pos;
  while ((pos = buf.find('\n')) != std::string::npos || (*eof && !buf.empty())) {
    std::string line = pos == std::string::npos ? buf : buf.substr(0, pos);
    buf.erase(0, pos == std::string::npos ? buf.size() : pos + 1);
    if (isErr && !line.empty()) exit.lastLine = line;
    if (!quiet) std::fprintf(isErr ? stderr : stdout, "[rank %d] %s\n", rank, line.c_str());
    if (quiet && !isErr) progress.line(rank, line);
  }
  // Line by line even when stdout is a pipe (`stagescope run … | tee`): a rank's progress
  // must show when it happens, not when a 4 KiB buffer fills.
  if (!quiet && !isErr) std::fflush(stdout);
}

void signalAll(std::vector<Child>& kids, int sig) {
  for (auto& c : kids) {
    if (!c.done) {
      c.exit.stoppedByUs = true;
      kill(c.pid, sig);
    }
  }
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The handlers launchRanks replaced, restored when it returns.
struct SavedHandlers {
  struct sigaction intr {};
  struct sigaction term {};
  struct sigaction hup {};
};

// SIGINT, SIGTERM and SIGHUP set gInterrupted (cleared first) until restoreHandlers.
void installHandlers(SavedHandlers& saved) {
  gInterrupted = 0;
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigaction(SIGINT, &sa, &saved.intr);
  sigaction(SIGTERM, &sa, &saved.term);
  sigaction(SIGHUP, &sa,
            &saved.hup);  // a closed terminal (an SSH session) stops the run as Ctrl-C does
}

void restoreHandlers(const SavedHandlers& saved) {
  sigaction(SIGINT, &saved.intr, nullptr);
  sigaction(SIGTERM, &saved.term, nullptr);
  sigaction(SIGHUP, &saved.hup, nullptr);
}

// Every rank's process: a preforked one released with its environment where the spec has one,
// else a fresh fork+exec.
std::vector<Child> startRanks(const LaunchSpec& spec) {
  std::vector<Child> kids(spec.worldSize);
  for (int r = 0; r < spec.worldSize; ++r) {
    if (spec.preforked && r < spec.preforked->size()) {
      const PreforkedRank p = spec.preforked->release(r, rankEnvironment(spec, r));
      kids[r].pid = p.pid;
      kids[r].out = p.out;
      kids[r].err = p.err;
    } else {
      kids[r].pid = spawn(spec, r, &kids[r].out, &kids[r].err);
    }
    kids[r].exit.rank = r;
  }
  return kids;
}

// What launchRanks' loop shares: the ranks' processes, the result being built, and once a rank
// failed on its own or the launcher was interrupted, when stopping began and the grace (seconds)
// before the ranks left are stopped.
struct Launch {
  const LaunchSpec& spec;
  std::vector<Child> kids;
  LaunchResult result{};
  std::vector<int> failedInOrder{};  // ranks that failed on their own, in the order seen
  bool stopping = false;
  std::chrono::steady_clock::time_point stopAt{};
  double grace = 0;
  int alive = 0;  // ranks not yet reaped
};

// Waits up to 100 ms for output of any rank and forwards what came (drain); a pipe at its end is
// closed.
void forwardOutput(Launch& l, QuietProgress& progress) {
  std::vector<pollfd> fds;
  std::vector<std::pair<int, bool>> who;  // (rank, isErr)
  for (int r = 0; r < l.spec.worldSize; ++r) {
    if (l.kids[r].out >= 0) {
      fds.push_back({l.kids[r].out, POLLIN, 0});
      who.emplace_back(r, false);
    }
    if (l.kids[r].err >= 0) {
      fds.push_back({l.kids[r].err, POLLIN, 0});
      who.emplace_back(r, true);
    }
  }
  if (!fds.empty())
    poll(fds.data(), fds.size(), 100);
  else
    usleep(20000);
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    auto [r, isErr] = who[i];
    Child& c = l.kids[r];
    bool eof = false;
    drain(fds[i].fd, isErr ? c.errBuf : c.outBuf, r, isErr, l.spec.quiet, c.exit, &eof, progress);
    if (eof) {
      close(fds[i].fd);
      (isErr ? c.err : c.out) = -1;
    }
  }
}

// Rank `c` ended with wait status `status`: its exit recorded; the first rank to fail on its own
// (not stopped by us, no interrupt) starts stopping the others after a grace.
void recordExit(Launch& l, Child& c, int status) {
  c.done = true;
  --l.alive;
  c.exit.endedNs = nowNs();
  if (WIFSIGNALED(status))
    c.exit.signal = WTERMSIG(status);
  else
    c.exit.exitCode = WEXITSTATUS(status);
  const bool failed = c.exit.signal != 0 || c.exit.exitCode != 0;
  if (failed && !c.exit.stoppedByUs && !gInterrupted) l.failedInOrder.push_back(c.exit.rank);
  if (failed && !c.exit.stoppedByUs && l.result.firstFailure < 0 && !gInterrupted) {
    l.result.firstFailure = c.exit.rank;
    l.stopping = true;
    l.stopAt = std::chrono::steady_clock::now();
    // A timed-out rank: the others are timing out too; let them record their side.
    // A rendezvous verdict reaches every rank: let each record it.
    l.grace = c.exit.exitCode == kWorkerTimeout || c.exit.exitCode == kWorkerMismatch
                  ? l.spec.hangGraceSeconds
                  : 0.5;
  }
}

// Reaps every child that has ended, without waiting.
void reapExited(Launch& l) {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (auto& c : l.kids) {
      if (c.pid != pid || c.done) continue;
      recordExit(l, c, status);
    }
  }
}

// An interrupt stops every rank (SIGTERM, a 3 s grace); past the grace the ranks left get
// SIGTERM, and 2 s after that SIGKILL.
void stopWhenDue(Launch& l) {
  if (gInterrupted && !l.result.interrupted) {
    l.result.interrupted = true;
    l.result.interruptSignal = gInterrupted;
    signalAll(l.kids, SIGTERM);
    l.stopping = true;
    l.stopAt = std::chrono::steady_clock::now();
    l.grace = 3;
  }
  if (l.stopping && secondsSince(l.stopAt) > l.grace) {
    signalAll(l.kids, SIGTERM);
    if (secondsSince(l.stopAt) > l.grace + 2) signalAll(l.kids, SIGKILL);
  }
}

// Name the cause, not the first consequence: ranks that lose a peer fail within the same
// poll as the peer.  A rank killed by a signal outranks one that failed with an error,
// which outranks one that timed out (timeouts follow both).
void nameFirstCause(Launch& l) {
  auto severity = [](const RankExit& e) {
    return e.signal ? 0 : e.exitCode != kWorkerTimeout ? 1 : 2;
  };
  for (int r : l.failedInOrder) {
    if (severity(l.kids[r].exit) < severity(l.kids[l.result.firstFailure].exit))
      l.result.firstFailure = r;
  }
}

}  // namespace

std::string LaunchResult::describe() const {
  if (interrupted) {
    const char* sig = interruptSignal == SIGINT    ? "SIGINT (Ctrl-C)"
                      : interruptSignal == SIGTERM ? "SIGTERM"
                      : interruptSignal == SIGHUP  ? "SIGHUP (its terminal was closed)"
                                                   : "a signal";
    return std::string("interrupted: the launcher got ") + sig + "; all ranks were stopped";
  }
  if (firstFailure < 0) return "all ranks completed";
  const RankExit& r = ranks[firstFailure];
  std::string s = "rank " + std::to_string(r.rank);
  if (r.signal) {
    s += " was killed by signal " + std::to_string(r.signal) + " (" + strsignal(r.signal) + ")";
  } else if (r.exitCode == kWorkerTimeout) {
    s += " timed out waiting for a peer (hang)";
  } else if (r.exitCode == kWorkerMismatch) {
    s += " stopped at rendezvous";
  } else if (r.exitCode == kWorkerCorrupt) {
    s += " stopped the run";
  } else {
    s += " exited with code " + std::to_string(r.exitCode);
  }
  if (!r.lastLine.empty()) s += ": " + r.lastLine;
  return s;
}

LaunchResult launchRanks(const LaunchSpec& spec) {
  SavedHandlers saved;
  installHandlers(saved);
  Launch l{spec, startRanks(spec)};
  QuietProgress progress(stdout, spec.quiet ? -1 : 0);
  l.stopAt = std::chrono::steady_clock::now();
  l.alive = spec.worldSize;
  while (l.alive > 0) {
    forwardOutput(l, progress);
    reapExited(l);
    stopWhenDue(l);
  }
  nameFirstCause(l);
  progress.finish();
  for (auto& c : l.kids) {
    if (c.out >= 0) close(c.out);
    if (c.err >= 0) close(c.err);
    l.result.ranks.push_back(c.exit);
  }
  restoreHandlers(saved);
  return std::move(l.result);
}

}  // namespace stagescope::engine
