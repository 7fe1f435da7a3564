#include "tests/engine/MultiProcess.h"

#include <ATen/Parallel.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/engine/ProcessGroups.h"

namespace stagescope::testing {
namespace {

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string formatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::vector<RankOutcome> runRanks(int world, const std::function<std::string(int, int, int)>& body,
                                  std::chrono::seconds deadline) {
  // c10d names socket peers with getnameinfo(); on a host without DNS each reverse lookup of
  // 127.0.0.1 waits out the resolver timeout (5 s).  Keep that short for every process here.
  setenv("RES_OPTIONS", "timeout:1 attempts:1", /*overwrite=*/0);
  char dirTemplate[] = "/tmp/stagescope_comm_XXXXXX";
  if (!mkdtemp(dirTemplate)) throw std::runtime_error("mkdtemp failed");
  const std::string dir = dirTemplate;
  // The store server starts only after every child is forked: its thread resolves peer
  // addresses (getnameinfo) and a fork while it holds the resolver lock leaves the child
  // deadlocked in its own first lookup.  Children learn the port over a socketpair.
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(world, -1);
  std::vector<int> portFds(world, -1);
  auto killAll = [&] {
    for (int r = 0; r < world; ++r) {
      if (pids[r] > 0) kill(pids[r], SIGKILL);
      if (portFds[r] >= 0) close(portFds[r]);
    }
    for (pid_t p : pids) {
      if (p > 0) waitpid(p, nullptr, 0);
    }
  };
  for (int rank = 0; rank < world; ++rank) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
      killAll();
      throw std::runtime_error("socketpair failed");
    }
    pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      killAll();
      throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test process
      close(fds[0]);
      const std::string path = dir + "/rank" + std::to_string(rank);
      int port = 0;
      pollfd pfd{fds[1], POLLIN, 0};
      if (poll(&pfd, 1, 30000) != 1 || read(fds[1], &port, sizeof port) != sizeof port) {
        writeFile(path, "ERROR no store port from the parent\n");
        _exit(2);
      }
      close(fds[1]);
      int code = 0;
      try {
        at::set_num_threads(1);
        writeFile(path, body(rank, world, port));
      } catch (const std::exception& e) {
        writeFile(path, std::string("ERROR ") + e.what() + "\n");
        code = 1;
      } catch (...) {
        writeFile(path, "ERROR unknown exception\n");
        code = 1;
      }
      _exit(code);  // skip destructors and atexit handlers inherited from the parent
    }
    close(fds[1]);
    pids[rank] = pid;
    portFds[rank] = fds[0];
  }
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = engine::connectStore("127.0.0.1", 0, /*isServer=*/true, world,
                                 std::chrono::milliseconds(20000));
  } catch (...) {
    killAll();
    throw;
  }
  const int port = static_cast<c10d::TCPStore&>(*store).getPort();
  for (int rank = 0; rank < world; ++rank) {
    // MSG_NOSIGNAL: a child that already died must not SIGPIPE the test process.
    if (send(portFds[rank], &port, sizeof port, MSG_NOSIGNAL) != sizeof port) {
      // that child will report no port (or is gone); its outcome says so
    }
    close(portFds[rank]);
    portFds[rank] = -1;
  }

  std::vector<RankOutcome> out(world);
  if (const char* env = std::getenv("STAGESCOPE_TEST_DEADLINE_S")) {
    deadline = std::chrono::seconds(std::atoi(env));
  }
  const auto until = std::chrono::steady_clock::now() + deadline;
  int running = world;
  while (running > 0) {
    for (int rank = 0; rank < world; ++rank) {
      if (pids[rank] <= 0) continue;
      int status = 0;
      pid_t r = waitpid(pids[rank], &status, WNOHANG);
      if (r == pids[rank]) {
        out[rank].exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        pids[rank] = -1;
        --running;
      }
    }
    if (running == 0) break;
    if (std::chrono::steady_clock::now() > until) {
      for (int rank = 0; rank < world; ++rank) {
        if (pids[rank] <= 0) continue;
        if (const char* gdb = std::getenv("STAGESCOPE_TEST_GDB"); gdb && *gdb == '1') {
          // Debug aid: the hung child's stacks, appended to its report.
          const std::string cmd = "gdb -p " + std::to_string(pids[rank]) +
                                  " -batch -ex 'thread apply all bt' > " + dir + "/gdb" +
                                  std::to_string(rank) + " 2>&1";
          if (std::system(cmd.c_str()) != 0) {
            // best effort
          }
        }
        kill(pids[rank], SIGKILL);
        waitpid(pids[rank], nullptr, 0);
        out[rank].timedOut = true;
        out[rank].exitCode = -1;
        pids[rank] = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  for (int rank = 0; rank < world; ++rank) {
    out[rank].rank = rank;
    const std::string path = dir + "/rank" + std::to_string(rank);
    if (std::filesystem::exists(path)) out[rank].report = readFile(path);
    if (std::filesystem::exists(dir + "/gdb" + std::to_string(rank))) {
      out[rank].report += "GDB\n" + readFile(dir + "/gdb" + std::to_string(rank));
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return out;
}

void Report::put(const std::string& key, const std::vector<std::string>& tokens) {
  text_ += key;
  for (const auto& t : tokens) text_ += " " + t;
  text_ += "\n";
}

void Report::put(const std::string& key, const std::vector<double>& values) {
  std::vector<std::string> t;
  for (double v : values) t.push_back(formatDouble(v));
  put(key, t);
}

void Report::put(const std::string& key, const std::vector<int64_t>& values) {
  std::vector<std::string> t;
  for (int64_t v : values) t.push_back(std::to_string(v));
  put(key, t);
}

std::map<std::string, std::vector<std::string>> Report::parse(const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string key, w;
    if (!(words >> key)) continue;
    std::vector<std::string> tokens;
    while (words >> w) tokens.push_back(w);
    out[key] = tokens;
  }
  return out;
}

std::vector<double> toDoubles(const std::vector<std::string>& tokens) {
  std::vector<double> v;
  for (const auto& t : tokens) v.push_back(std::stod(t));
  return v;
}

std::vector<int64_t> toInts(const std::vector<std::string>& tokens) {
  std::vector<int64_t> v;
  for (const auto& t : tokens) v.push_back(std::stoll(t));
  return v;
}

}  // namespace stagescope::testing
