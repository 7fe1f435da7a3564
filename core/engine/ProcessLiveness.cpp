#include "core/engine/ProcessLiveness.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace stagescope::engine {
namespace {

std::string firstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The fields of /proc/<pid>/stat after "pid (comm)"; [0] is field 3 (the state).  The command
// name may hold spaces and parentheses: the fields start after the last ')'.
std::vector<std::string> statFields(int pid) {
  const std::string line = firstLine("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = line.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) return fields;
  std::istringstream rest(line.substr(close + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

constexpr size_t kState = 0;       // field 3
constexpr size_t kStartTime = 19;  // field 22
constexpr size_t kExitCode = 49;   // field 52 (Linux >= 3.5): the wait status of a zombie

}  // namespace

ProcessIdentity ProcessIdentity::self() {
  ProcessIdentity p;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  p.host = host;
  p.pid = static_cast<int>(getpid());
  const auto fields = statFields(p.pid);
  if (fields.size() > kStartTime)
    p.startTicks = std::strtoull(fields[kStartTime].c_str(), nullptr, 10);
  char ns[128] = {0};
  const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  std::string pidNs = n > 0 ? std::string(ns, static_cast<size_t>(n)) : "?";
  std::string machine = p.host + "|" + firstLine("/proc/sys/kernel/random/boot_id") + "|" + pidNs;
  for (char& c : machine)
    if (c == ' ') c = '_';
  p.machine = machine;
  return p;
}

std::string ProcessIdentity::encode() const {
  return std::to_string(pid) + " " + std::to_string(startTicks) + " " + machine + " " + host;
}

std::optional<ProcessIdentity> ProcessIdentity::decode(const std::string& text) {
  std::istringstream in(text);
  ProcessIdentity p;
  if (!(in >> p.pid >> p.startTicks >> p.machine)) return std::nullopt;
  std::getline(in >> std::ws, p.host);
  return p;
}

ProcessStatus processStatus(const ProcessIdentity& p) {
  ProcessStatus s;
  if (p.pid <= 0 || p.machine != ProcessIdentity::self().machine) return s;  // Elsewhere
  const auto fields = statFields(p.pid);
  if (fields.size() <= kStartTime ||
      (p.startTicks != 0 &&
       std::strtoull(fields[kStartTime].c_str(), nullptr, 10) != p.startTicks)) {
    s.state = ProcessState::Gone;  // no such pid, or it was recycled for another process
    return s;
  }
  if (fields[kState] == "Z" || fields[kState] == "X") {
    s.state = ProcessState::Exited;
    if (fields.size() > kExitCode) {
      const int status = std::atoi(fields[kExitCode].c_str());
      if (WIFSIGNALED(status)) s.signal = WTERMSIG(status);
      if (WIFEXITED(status)) s.exitCode = WEXITSTATUS(status);
    }
    return s;
  }
  s.state = ProcessState::Running;
  return s;
}

std::string signalName(int signal) {
  switch (signal) {
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    default:
      return "signal " + std::to_string(signal);
  }
}

}  // namespace stagescope::engine
