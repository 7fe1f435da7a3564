#include "tests/debug/HostileHarness.h"

#include <cctype>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/debug/DebugUtil.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

namespace fs = std::filesystem;

// Blank-separated words; '...' literal, "..." with \" and \\ escapes; '#' starts a comment
// outside quotes at the start of a word.
std::vector<std::string> words(const std::string& line, const std::string& where) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size() || line[i] == '#') break;
    std::string w;
    bool any = false;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') {
      const char q = line[i];
      if (q == '\'' || q == '"') {
        const size_t start = ++i;
        while (i < line.size() && line[i] != q) {
          if (q == '"' && line[i] == '\\' && i + 1 < line.size()) ++i;
          w += line[i++];
        }
        if (i >= line.size()) throw std::runtime_error(where + ": unterminated quote");
        (void)start;
        ++i;
        any = true;
      } else {
        w += line[i++];
        any = true;
      }
    }
    if (any) out.push_back(w);
  }
  return out;
}

std::string expand(std::string arg, const std::string& sandbox) {
  for (size_t at; (at = arg.find("{d}")) != std::string::npos;) arg.replace(at, 3, sandbox);
  for (size_t at; (at = arg.find("{nl}")) != std::string::npos;) arg.replace(at, 4, "\n");
  for (size_t at = 0; (at = arg.find("{x", at)) != std::string::npos;) {  // {xNN}: a byte
    if (at + 5 <= arg.size() && arg[at + 4] == '}' &&
        std::isxdigit(static_cast<unsigned char>(arg[at + 2])) &&
        std::isxdigit(static_cast<unsigned char>(arg[at + 3]))) {
      arg.replace(at, 5, 1, static_cast<char>(std::stoi(arg.substr(at + 2, 2), nullptr, 16)));
    }
    ++at;
  }
  for (size_t at; (at = arg.find("{long}")) != std::string::npos;) {
    arg.replace(at, 6, std::string(5000, 'x'));
  }
  return arg;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// What was in the sandbox: relative path -> "type:content" (links: their target, never
// followed - a link may point nowhere or at itself).
void snapshotInto(const fs::path& root, const fs::path& dir,
                  std::map<std::string, std::string>& out) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    const fs::path path = it->path();
    const std::string rel = path.lexically_relative(root).string();
    std::error_code sec;
    const auto st = fs::symlink_status(path, sec);
    if (fs::is_symlink(st)) {
      out[rel] = "link:" + fs::read_symlink(path, sec).string();
    } else if (fs::is_regular_file(st)) {
      out[rel] = "file:" + readFile(path.string());
    } else if (fs::is_directory(st)) {
      out[rel] = "dir";
      snapshotInto(root, path, out);
    } else {
      out[rel] = "special";
    }
  }
}

std::map<std::string, std::string> snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  snapshotInto(root, root, out);
  return out;
}

// /proc/PID/cmdline, or what could be read of it: a process that exits meanwhile makes
// read() fail with ESRCH, which std::ifstream turned into an exception out of the harness
// (seen under the sanitizer pass; the exception also leaked the /proc DIR).
std::string procCmdline(const char* pid) {
  std::string out;
  const int fd = ::open(("/proc/" + std::string(pid) + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// Processes (other than us) whose command line mentions `needle`.
std::vector<int> processesMentioning(const std::string& needle) {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    std::string cmd = procCmdline(e->d_name);
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos) out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

// In a forked child of a root harness: makes the command that it execs obey file permissions.
// Root keeps its uid (so it still reaches the binaries and LibTorch wherever the clone lives,
// e.g. under a 0700 home directory that user nobody cannot enter) but loses
// CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from its bounding set, which is what a root
// process's capabilities become at execve. A mode-0555 directory then refuses root's writes
// and a mode-0000 file its reads, as they would a user's. Returns false if the kernel refused.
bool dropFileOverride() {
  return ::prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) == 0 &&
         ::prctl(PR_CAPBSET_DROP, CAP_DAC_READ_SEARCH, 0, 0, 0) == 0;
}

struct Prepared {
  rlim_t fsize = RLIM_INFINITY;
  bool withoutFileOverride = false;  // see dropFileOverride()
  bool twice = false;
  int maxLines = 2;
  bool quietStdout = false;  // nothing on stdout (quiet-stdout): a failed command printed no report
  std::vector<std::string> mayChange;
  std::vector<std::pair<std::string, std::string>> env;  // set in the command's environment
  int signal = 0, signalAfterMs = 0;                     // sent to the command (signal:)
  bool signalAtTemp = false;  // ... when it creates a temporary file (signal:SIG@tmp)
  std::vector<std::string> sqliteLocks, flocks;  // held by another process (…lock:)
  std::string live;  // "launcher" or "workers": a run being written meanwhile (live:)
  int liveRanks = 0;
  int times = 1;  // the command, one run after another (times:)
};

// The text of file:/append:/prepend: values: "\n", "\r", "\t", "\xNN" and
// "{repeat:N:TEXT}" (TEXT N times) expand.
std::string fileText(const std::string& value) {
  std::string out;
  for (size_t i = 0; i < value.size();) {
    if (value.compare(i, 8, "{repeat:") == 0) {
      const size_t colon = value.find(':', i + 8), close = value.find('}', i + 8);
      if (colon != std::string::npos && close != std::string::npos && colon < close) {
        const long n = std::stol(value.substr(i + 8, colon - i - 8));
        const std::string unit = fileText(value.substr(colon + 1, close - colon - 1));
        for (long k = 0; k < n; ++k) out += unit;
        i = close + 1;
        continue;
      }
    }
    if (value[i] == '\\' && i + 1 < value.size()) {
      const char e = value[i + 1];
      if (e == 'n' || e == 'r' || e == 't') {
        out += e == 'n' ? '\n' : e == 'r' ? '\r' : '\t';
        i += 2;
        continue;
      }
      if (e == 'x' && i + 3 < value.size()) {
        out += static_cast<char>(std::stoi(value.substr(i + 2, 2), nullptr, 16));
        i += 4;
        continue;
      }
    }
    out += value[i++];
  }
  return out;
}

// A process that holds a lock on `path` until killed: SQLite's exclusive lock (BEGIN
// EXCLUSIVE: no reader or writer gets in; nothing is written) or flock(LOCK_EX).  Returns once
// the lock is held.
pid_t holdLock(const std::string& path, bool sqliteLock) {
  int ready[2];
  if (::pipe(ready) != 0) throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    bool held = false;
    if (sqliteLock) {
      sqlite3* db = nullptr;
      held = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK &&
             sqlite3_exec(db, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK;
    } else {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      held = fd >= 0 && ::flock(fd, LOCK_EX) == 0;
    }
    const char byte = held ? '1' : '0';
    if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = '0';
  const bool ok = ::read(ready[0], &byte, 1) == 1 && byte == '1';
  ::close(ready[0]);
  if (!ok) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    throw std::runtime_error(path + ": could not take the lock of the case's setup");
  }
  return pid;
}

void makeSpecial(const std::string& path, bool device) {
  if (device && ::mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) return;
  if (::mkfifo(path.c_str(), 0666) != 0) {
    throw std::runtime_error("mkfifo " + path + ": " + std::strerror(errno));
  }
}

Prepared prepare(const HostileCase& c, const std::string& sandbox, const Fixtures& fixtures) {
  Prepared p;
  for (const auto& s : c.setup) {
    const size_t colon = s.find(':');
    const std::string kind = s.substr(0, colon);
    const std::string rest = colon == std::string::npos ? "" : s.substr(colon + 1);
    const size_t eq = rest.find('=');
    const std::string name = expand(rest.substr(0, eq), sandbox);
    const std::string value = eq == std::string::npos ? "" : rest.substr(eq + 1);
    const std::string path = sandbox + "/" + name;
    if (kind != "fsize" && kind != "lines" && kind != "twice" && kind != "mayChange" &&
        kind != "env" && kind != "signal" && kind != "sqlitelock" && kind != "flock" &&
        kind != "append" && kind != "prepend" && kind != "crlf" && kind != "mode" &&
        kind != "live" && kind != "times") {
      fs::create_directories(fs::path(path).parent_path());
    }
    if (kind == "file") {
      std::ofstream(path, std::ios::binary) << fileText(value);
    } else if (kind == "append" || kind == "prepend") {
      const std::string old = readFile(path);
      std::ofstream(path, std::ios::binary | std::ios::trunc)
          << (kind == "append" ? old + fileText(value) : fileText(value) + old);
    } else if (kind == "crlf") {
      std::string text, old = readFile(path);
      for (char ch : old) text += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
      std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    } else if (kind == "signal") {
      const size_t at = rest.find('@');
      const std::string sig = rest.substr(0, at);
      p.signal = sig == "INT" ? SIGINT : sig == "TERM" ? SIGTERM : sig == "HUP" ? SIGHUP : 0;
      if (p.signal == 0 || at == std::string::npos) throw std::runtime_error(label(c) + ": " + s);
      const std::string when = rest.substr(at + 1);
      p.signalAtTemp = when == "tmp";
      if (!p.signalAtTemp) p.signalAfterMs = std::stoi(when);
    } else if (kind == "mode") {  // permissions (octal); the command then obeys them
      fs::permissions(path, static_cast<fs::perms>(std::stoi(value, nullptr, 8)));
      p.withoutFileOverride = ::geteuid() == 0;
    } else if (kind == "sqlitelock") {
      p.sqliteLocks.push_back(path);
    } else if (kind == "flock") {
      p.flocks.push_back(path);
    } else if (kind == "live") {
      p.live = rest.substr(0, eq);
      p.liveRanks = value.empty() ? 0 : std::stoi(value);
      if ((p.live != "launcher" && p.live != "workers") || p.liveRanks <= 0)
        throw std::runtime_error(label(c) + ": " + s +
                                 " (expected live:launcher=N or live:workers=N)");
    } else if (kind == "times") {
      p.times = std::stoi(rest);
    } else if (kind == "copy") {
      auto it = fixtures.find(value);
      if (it == fixtures.end()) throw std::runtime_error(label(c) + ": no fixture " + value);
      fs::copy_file(it->second, path, fs::copy_options::overwrite_existing);
      fs::permissions(path, fs::perms(0644));
    } else if (kind == "dir") {
      fs::create_directories(path);
      fs::permissions(path, fs::perms(0755));
    } else if (kind == "rodir") {
      fs::create_directories(path);
      fs::permissions(path, fs::perms(0555));
      p.withoutFileOverride = ::geteuid() == 0;
    } else if (kind == "fifo" || kind == "device") {
      makeSpecial(path, kind == "device");
    } else if (kind == "link") {
      fs::create_symlink(expand(value, sandbox), path);
    } else if (kind == "quiet-stdout") {
      p.quietStdout = true;
    } else if (kind == "mayChange") {
      p.mayChange.push_back(name);
    } else if (kind == "fsize") {
      p.fsize = static_cast<rlim_t>(std::stoll(rest));
    } else if (kind == "lines") {
      p.maxLines = std::stoi(rest);
    } else if (kind == "twice") {
      p.twice = true;
    } else if (kind == "env") {
      std::string text = expand(value, sandbox);
      for (size_t at; (at = text.find("\\n")) != std::string::npos;) text.replace(at, 2, "\n");
      p.env.emplace_back(rest.substr(0, eq), text);
    } else {
      throw std::runtime_error(label(c) + ": unknown setup '" + s + "'");
    }
  }
  return p;
}

struct Child {
  pid_t pid = -1;
  std::string outPath, errPath;
};

Child start(const std::vector<std::string>& args, const Prepared& p, const std::string& logs,
            int index) {
  Child ch;
  ch.outPath = logs + "/out" + std::to_string(index);
  ch.errPath = logs + "/err" + std::to_string(index);
  const int outFd = ::open(ch.outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int errFd = ::open(ch.errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::vector<std::string> argv = {stagescopeExe()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  // The environment, prepared before fork (the child only calls async-signal-safe functions).
  std::vector<std::string> envText;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& kv : p.env) replaced = replaced || entry.rfind(kv.first + "=", 0) == 0;
    if (!replaced) envText.push_back(entry);
  }
  for (const auto& [name, value] : p.env) envText.push_back(name + "=" + value);
  std::vector<char*> cenv;
  for (auto& e : envText) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  ch.pid = ::fork();
  if (ch.pid == 0) {
    ::setpgid(0, 0);
    // The command starts with the signals' default actions and none blocked, however the
    // suite was started (a shell's background job ignores SIGINT, which exec keeps): a
    // signal: case then tests what a user's Ctrl-C does.
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(outFd, 1);
    ::dup2(errFd, 2);
    if (p.fsize != RLIM_INFINITY) {
      rlimit lim{p.fsize, p.fsize};
      ::setrlimit(RLIMIT_FSIZE, &lim);
    }
    if (p.withoutFileOverride && !dropFileOverride()) ::_exit(120);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::setpgid(ch.pid, ch.pid);
  ::close(outFd);
  ::close(errFd);
  return ch;
}

// Returns as soon as a file with ".tmp-" in its name is created in the watched directory
// (`watch`: an inotify descriptor), or once every child has exited, or after `timeoutSeconds`.
// The children are not reaped (finish() does that).
void waitForTempFile(int watch, const std::vector<Child>& children, int timeoutSeconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  alignas(inotify_event) char buf[8192];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{watch, POLLIN, 0};
    if (::poll(&pfd, 1, 20) > 0) {
      const ssize_t n = ::read(watch, buf, sizeof buf);
      for (ssize_t at = 0; at < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
        if (ev->len > 0 && std::strstr(ev->name, ".tmp-") != nullptr) return;
        at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      }
    }
    bool running = false;
    for (const auto& ch : children) {
      siginfo_t info{};
      running = running || (::waitid(P_PID, static_cast<id_t>(ch.pid), &info,
                                     WEXITED | WNOHANG | WNOWAIT) == 0 &&
                            info.si_pid == 0);
    }
    if (!running) return;
  }
}

// Waits for the child; kills its process group after `timeoutSeconds` (exit code 124).
int finish(const Child& ch, int timeoutSeconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  int status = 0;
  while (::waitpid(ch.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-ch.pid, SIGKILL);
      ::waitpid(ch.pid, &status, 0);
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void judgeRun(const HostileCase& c, const Prepared& p, const CaseRun& r, bool mustSucceed,
              std::vector<std::string>& failures) {
  const std::string tag = mustSucceed ? " (the run that must succeed)" : "";
  if (mustSucceed ? r.exitCode != 0 : !contains(c.codes, r.exitCode)) {
    std::string want;
    for (int code : mustSucceed ? std::vector<int>{0} : c.codes) {
      want += (want.empty() ? "" : ",") + std::to_string(code);
    }
    failures.push_back("exit code " + std::to_string(r.exitCode) + ", expected " + want + tag);
  }
  const bool diedOfOurSignal = p.signal != 0 && r.exitCode == 128 + p.signal;
  if (!diedOfOurSignal && !contains(documentedExitCodes(), r.exitCode)) {
    failures.push_back("exit code " + std::to_string(r.exitCode) + " is not a documented one");
  }
  const auto errLines = lines(r.err);
  if (static_cast<int>(errLines.size()) > p.maxLines) {
    failures.push_back(std::to_string(errLines.size()) + " lines on stderr, at most " +
                       std::to_string(p.maxLines) + " allowed" + tag);
  }
  if (!mustSucceed && p.quietStdout && !r.out.empty()) {
    failures.push_back("stdout holds " + std::to_string(r.out.size()) +
                       " bytes before the failure (expected nothing): " + r.out.substr(0, 120));
  }
  if (!mustSucceed && !c.expect.empty() && r.err.find(c.expect) == std::string::npos) {
    failures.push_back("stderr does not contain '" + c.expect + "'");
  }
  // Text quoted from a hostile input is printed escaped: no control character (an escape
  // sequence, a carriage return, a bell) reaches the terminal raw.
  for (const std::string* text : {&r.out, &r.err}) {
    const auto raw = std::find_if(text->begin(), text->end(), [](char ch) {
      const auto u = static_cast<unsigned char>(ch);
      return (u < 0x20 && ch != '\n' && ch != '\t') || u == 0x7f;
    });
    if (raw != text->end()) {
      failures.push_back(std::string(text == &r.out ? "stdout" : "stderr") +
                         " holds the raw control character \\x" +
                         "0123456789abcdef"[static_cast<unsigned char>(*raw) >> 4] +
                         "0123456789abcdef"[static_cast<unsigned char>(*raw) & 15] + tag);
    }
  }
  for (const char* bad : {"terminate called", "Aborted", "Segmentation fault",
                          "Exception raised from", "Sanitizer", "runtime error:"}) {
    if (r.err.find(bad) != std::string::npos || r.out.find(bad) != std::string::npos) {
      failures.push_back(std::string("output contains '") + bad + "'");
    }
  }
}

// ---- live: a run being written while the case's command runs ------------------------------
//
// The sandbox holds live.toml (a config whose run waits mid-way: a delay fault); the run writes
// live.db.  `launcher`: `stagescope run live.toml -o live.db`.  `workers`: one `stagescope
// worker` per rank (torchrun's environment), then a peek `merge live.db --config live.toml`
// makes the run file (status running).  Either way the case's command starts once every rank
// has committed actions to its shard.

// A port nobody listens on right now (the kernel's choice for an ephemeral bind).
int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error(std::string("live: no free port: ") + std::strerror(errno));
  return ntohs(a.sin_port);
}

bool running(const Child& ch) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(ch.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == 0;
}

// The actions committed to `shard` (-1 while it cannot be read yet).  Opened read-only and
// closed again: the harness must not be seen holding a shard open when the command looks.
int64_t committedActions(const std::string& shard) {
  sqlite3* db = nullptr;
  int64_t n = -1;
  if (sqlite3_open_v2(shard.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM actions", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

// The run file's status ("" when it cannot be read), read-only and closed again.
std::string runStatus(const std::string& run) {
  sqlite3* db = nullptr;
  std::string status;
  if (sqlite3_open_v2(run.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT status FROM run", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
      status = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return status;
}

std::string tail(const std::string& text, size_t n = 1500) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

CaseRun runNow(const std::vector<std::string>& args, const std::string& logs, int index,
               int timeoutSeconds) {
  const Child ch = start(args, Prepared{}, logs, index);
  CaseRun r;
  r.exitCode = finish(ch, timeoutSeconds);
  r.out = readFile(ch.outPath);
  r.err = readFile(ch.errPath);
  return r;
}

struct LiveRun {
  std::vector<Child> procs;  // the launcher, or one worker per rank
  std::string run;           // the run file
};

// "" once every rank has committed actions to its shard; else why not (bounded: a diagnosis,
// never a hang): a process of the run exited first, or `timeoutSeconds` passed.
std::string waitForCommittedActions(const LiveRun& live, int ranks, int timeoutSeconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  for (int r = 0; r < ranks;) {
    if (committedActions(live.run + ".rank" + std::to_string(r) + ".shard") > 0) {
      ++r;
      continue;
    }
    bool all = true;
    for (const auto& ch : live.procs) all = all && running(ch);
    if (!all || std::chrono::steady_clock::now() > deadline) {
      std::string why = "live: rank " + std::to_string(r) + " committed no action to its shard " +
                        (all ? "within " + std::to_string(timeoutSeconds) + " s"
                             : std::string("before a process of the run exited"));
      for (const auto& ch : live.procs) why += "\n" + tail(readFile(ch.errPath));
      return why;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

LiveRun startLive(const Prepared& p, const std::string& sandbox, const std::string& logs,
                  int timeoutSeconds) {
  LiveRun live;
  live.run = sandbox + "/live.db";
  const std::string cfg = sandbox + "/live.toml";
  // The workers' port is free when chosen, but another test running in parallel can bind it
  // before rank 0 does (EADDRINUSE, seen once in CI): then the attempt's processes and shards
  // (this harness's own, in its sandbox) are removed and a new port is tried.
  constexpr int kPortAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    live.procs.clear();
    if (p.live == "launcher") {
      live.procs.push_back(start({"run", cfg, "-o", live.run, "-q"}, Prepared{}, logs, 100));
    } else {
      const std::string port = std::to_string(freePort());
      for (int r = 0; r < p.liveRanks; ++r) {
        Prepared env;
        env.env = {{"RANK", std::to_string(r)},
                   {"LOCAL_RANK", std::to_string(r)},
                   {"WORLD_SIZE", std::to_string(p.liveRanks)},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", port}};
        live.procs.push_back(start({"worker", cfg, "--out", live.run}, env, logs, 100 + r));
      }
    }
    const std::string why = waitForCommittedActions(live, p.liveRanks, timeoutSeconds);
    if (why.empty()) break;
    const bool portTaken = why.find("EADDRINUSE") != std::string::npos;
    if (!portTaken || p.live != "workers" || attempt == kPortAttempts)
      throw std::runtime_error(why);
    for (const auto& ch : live.procs) {
      ::kill(-ch.pid, SIGKILL);
      finish(ch, 10);
    }
    for (int r = 0; r < p.liveRanks; ++r)
      fs::remove(live.run + ".rank" + std::to_string(r) + ".shard");
  }
  if (p.live == "workers") {  // the peek merge that makes the run file
    const CaseRun peek = runNow({"merge", live.run, "--config", cfg}, logs, 99, timeoutSeconds);
    if (peek.exitCode != 0 || peek.out.find("still writing") == std::string::npos)
      throw std::runtime_error("live: the peek merge exited " + std::to_string(peek.exitCode) +
                               ": " + tail(peek.out + peek.err));
  }
  return live;
}

// After the command: the run is still live, nothing but its shards changed, then it ends as
// it would have alone (completed; `check` passes).
void judgeLive(const LiveRun& live, const std::map<std::string, std::string>& before,
               const std::string& statusBefore, const Prepared& p, const std::string& sandbox,
               const std::string& logs, int timeoutSeconds, std::vector<std::string>& failures) {
  bool all = true;
  for (const auto& ch : live.procs) all = all && running(ch);
  if (!all)
    failures.push_back(
        "live: the run ended before the command did: it looked at an ended run (the config's "
        "delay is too short for this machine)");
  // What the writers change is their shards; everything else is as it was (the run file,
  // its status, its lock).
  const auto isShard = [](const std::string& rel) {
    return rel.find(".shard") != std::string::npos;
  };
  const auto after = snapshot(sandbox);
  if (const std::string now = runStatus(live.run); now != statusBefore)
    failures.push_back("live: the run's status went from '" + statusBefore + "' to '" + now +
                       "' while the run was live");
  for (const auto& [rel, what] : before) {
    if (isShard(rel) || std::find(p.mayChange.begin(), p.mayChange.end(), rel) != p.mayChange.end())
      continue;
    auto it = after.find(rel);
    if (it == after.end())
      failures.push_back("live: pre-existing " + rel + " was removed");
    else if (it->second != what)
      failures.push_back("live: pre-existing " + rel + " was changed");
  }
  for (const auto& [rel, what] : after) {
    if (!before.count(rel) && !isShard(rel) && rel.find(".tmp-") == std::string::npos &&
        rel != "trace.json" && rel != "check.json")
      failures.push_back("live: " + rel + " appeared while the run was live");
  }
  for (const auto& ch : live.procs) {
    const int code = finish(ch, timeoutSeconds);
    if (code != 0)
      failures.push_back("live: a process of the run exited " + std::to_string(code) + ": " +
                         tail(readFile(ch.errPath)));
  }
  if (live.procs.size() > 1) {  // workers: the merge after the run judges it
    const CaseRun merged = runNow({"merge", live.run}, logs, 98, timeoutSeconds);
    if (merged.exitCode != 0 || merged.out.find("run completed") == std::string::npos)
      failures.push_back("live: the merge after the run exited " + std::to_string(merged.exitCode) +
                         ": " + tail(merged.out + merged.err));
  }
  const CaseRun checked = runNow({"check", live.run}, logs, 97, timeoutSeconds);
  if (checked.exitCode != 0)
    failures.push_back("live: check of the ended run exited " + std::to_string(checked.exitCode) +
                       ": " + tail(checked.out + checked.err));
}

}  // namespace

const std::vector<int>& documentedExitCodes() {
  static const std::vector<int> codes = {0, 1, 2, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  return codes;
}

bool needsEngine(const HostileCase& c) {
  return !c.args.empty() && (c.args[0] == "run" || c.args[0] == "worker");
}

std::vector<HostileCase> runnable(std::vector<HostileCase> all, bool haveEngine) {
  if (!haveEngine) std::erase_if(all, [](const HostileCase& c) { return needsEngine(c); });
  return all;
}

std::string label(const HostileCase& c) {
  return fs::path(c.file).filename().string() + ":" + std::to_string(c.line) + " " + c.cls + "/" +
         c.name;
}

std::string testNameOf(const HostileCase& c) {
  std::string name = c.cls + "_" + c.name;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

std::string describeRuns(const CaseResult& r) {
  std::string detail;
  for (size_t i = 0; i < r.runs.size(); ++i) {
    detail += "\n--- run " + std::to_string(i) + " exit " + std::to_string(r.runs[i].exitCode) +
              "\nstderr:\n" + r.runs[i].err + "stdout:\n" + r.runs[i].out.substr(0, 2000);
  }
  return detail;
}

void PrintTo(const HostileCase& c, std::ostream* os) {
  *os << label(c);
}

std::vector<HostileCase> loadCases(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the case table");
  std::vector<HostileCase> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = path + ":" + std::to_string(n);
    const auto w = words(line, where);
    if (w.empty()) continue;
    const auto dashes = std::find(w.begin(), w.end(), "--");
    if (w.size() < 5 || dashes == w.end() || dashes - w.begin() < 4) {
      throw std::runtime_error(where + ": expected CLASS NAME CODES EXPECT [SETUP...] -- ARG...");
    }
    HostileCase c;
    c.file = path;
    c.line = n;
    c.cls = w[0];
    c.name = w[1];
    std::stringstream codes(w[2]);
    for (std::string code; std::getline(codes, code, ',');) {
      const size_t dash = code.find('-', 1);  // "10-19": a range
      const int first = std::stoi(code.substr(0, dash));
      const int last = dash == std::string::npos ? first : std::stoi(code.substr(dash + 1));
      for (int v = first; v <= last; ++v) c.codes.push_back(v);
    }
    c.expect = w[3] == "-" ? "" : w[3];
    c.setup.assign(w.begin() + 4, dashes);
    c.args.assign(dashes + 1, w.end());
    for (const auto& other : out) {
      if (other.cls == c.cls && other.name == c.name) {
        throw std::runtime_error(where + ": case " + c.cls + "/" + c.name + " appears twice");
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

CaseResult runHostileCase(const HostileCase& c, const Fixtures& fixtures, int timeoutSeconds) {
  CaseResult result;
  std::string root = (fs::temp_directory_path() / "stagescope-hostile-XXXXXX").string();
  if (!::mkdtemp(root.data())) throw std::runtime_error("mkdtemp: " + root);
  const std::string sandbox = root + "/sandbox", logs = root + "/logs";
  fs::create_directories(sandbox);
  fs::create_directories(logs);
  fs::permissions(root, fs::perms(0755));
  fs::permissions(sandbox, fs::perms(0755));
  result.sandbox = sandbox;
  const Prepared p = prepare(c, sandbox, fixtures);
  std::optional<LiveRun> live;
  if (!p.live.empty()) live = startLive(p, sandbox, logs, timeoutSeconds);
  const auto before = snapshot(sandbox);
  const std::string statusBefore = live ? runStatus(live->run) : "";
  if (live && statusBefore != "running")
    result.failures.push_back("live: the run file's status is '" + statusBefore +
                              "' before the command, expected 'running'");
  std::vector<std::string> args;
  for (const auto& a : c.args) args.push_back(expand(a, sandbox));

  // Locks held by another process for the whole command (it must not wait for them forever).
  std::vector<pid_t> holders;
  for (const auto& path : p.sqliteLocks) holders.push_back(holdLock(path, true));
  for (const auto& path : p.flocks) holders.push_back(holdLock(path, false));

  // signal:SIG@tmp watches the sandbox before the command starts, so no creation is missed.
  const int watch = p.signalAtTemp ? ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK) : -1;
  if (p.signalAtTemp && (watch < 0 || ::inotify_add_watch(watch, sandbox.c_str(), IN_CREATE) < 0)) {
    throw std::runtime_error(label(c) + ": inotify: " + std::strerror(errno));
  }
  std::vector<Child> children;
  for (int i = 0; i < (p.twice ? 2 : 1); ++i) children.push_back(start(args, p, logs, i));
  for (int i = 1; i < p.times; ++i) {  // times:N, one after another
    CaseRun r;
    r.exitCode = finish(children.back(), timeoutSeconds);
    r.out = readFile(children.back().outPath);
    r.err = readFile(children.back().errPath);
    judgeRun(c, p, r, false, result.failures);
    result.runs.push_back(std::move(r));
    children.push_back(start(args, p, logs, i));
  }
  if (p.times > 1) children.erase(children.begin(), children.end() - 1);
  if (p.signal != 0) {
    if (p.signalAtTemp) {
      waitForTempFile(watch, children, timeoutSeconds);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(p.signalAfterMs));
    }
    for (const auto& ch : children) ::kill(-ch.pid, p.signal);  // like Ctrl-C: the group
  }
  if (watch >= 0) ::close(watch);
  for (const auto& ch : children) {
    CaseRun r;
    r.exitCode = finish(ch, timeoutSeconds);
    r.out = readFile(ch.outPath);
    r.err = readFile(ch.errPath);
    result.runs.push_back(std::move(r));
  }
  if (p.twice) {
    // One wins (exit 0), the other is refused; which one is up to the scheduler.
    const size_t winner = result.runs[0].exitCode == 0 ? 0 : 1;
    judgeRun(c, p, result.runs[winner], true, result.failures);
    judgeRun(c, p, result.runs[1 - winner], false, result.failures);
  } else {
    judgeRun(c, p, result.runs[0], false, result.failures);
  }

  if (live)
    judgeLive(*live, before, statusBefore, p, sandbox, logs, timeoutSeconds, result.failures);

  // No process of the command left behind (a little grace for the kernel to reap).
  for (int attempt = 0;; ++attempt) {
    bool alive = false;
    for (const auto& ch : children) alive = alive || ::kill(-ch.pid, 0) == 0;
    const auto strays = processesMentioning(sandbox);
    if (!alive && strays.empty()) break;
    if (attempt == 100) {
      result.failures.push_back("processes left behind (" + std::to_string(strays.size()) +
                                " mention the sandbox)");
      for (const auto& ch : children) ::kill(-ch.pid, SIGKILL);
      for (int pid : strays) ::kill(pid, SIGKILL);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  for (pid_t h : holders) {
    ::kill(h, SIGKILL);
    ::waitpid(h, nullptr, 0);
  }

  // Every pre-existing file is still there, byte for byte (a live run: judgeLive compared
  // them while it was live; it changes them once it ends).
  const auto after = live ? before : snapshot(sandbox);
  for (const auto& [rel, what] : after) {
    if (!before.count(rel) && rel.find(".tmp-") != std::string::npos) {
      result.failures.push_back("temporary file " + rel + " left behind");
    }
  }
  for (const auto& [rel, what] : before) {
    if (std::find(p.mayChange.begin(), p.mayChange.end(), rel) != p.mayChange.end()) continue;
    auto it = after.find(rel);
    if (it == after.end()) {
      result.failures.push_back("pre-existing " + rel + " was removed");
    } else if (it->second != what) {
      result.failures.push_back("pre-existing " + rel + " was changed");
    }
  }

  if (result.failures.empty()) {
    std::error_code ec;
    fs::permissions(sandbox, fs::perms::owner_all, fs::perm_options::add, ec);
    for (auto it = fs::recursive_directory_iterator(sandbox, ec); !ec && it != decltype(it)();
         it.increment(ec)) {
      if (it->is_directory(ec))
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    fs::remove_all(root, ec);
  } else {
    result.failures.push_back("sandbox kept: " + sandbox);
  }
  return result;
}

}  // namespace stagescope::testing
