#include "tests/engine/MultiProcess.h"

#include <ATen/Parallel.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
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
  char dirTemplate[] = "/tmp/stagescope_comm_XXXXXX";
  if (!mkdtemp(dirTemplate)) throw std::runtime_error("mkdtemp failed");
  const std::string dir = dirTemplate;
  auto store = engine::connectStore("127.0.0.1", 0, /*isServer=*/true, world,
                                    std::chrono::milliseconds(20000));
  const int port = static_cast<c10d::TCPStore&>(*store).getPort();

  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(world, -1);
  for (int rank = 0; rank < world; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      for (pid_t p : pids) {
        if (p > 0) kill(p, SIGKILL);
      }
      for (pid_t p : pids) {
        if (p > 0) waitpid(p, nullptr, 0);
      }
      throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test process
      const std::string path = dir + "/rank" + std::to_string(rank);
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
    pids[rank] = pid;
  }

  std::vector<RankOutcome> out(world);
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
