#include "ui/ViewerTiming.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/events/Printable.h"

namespace stagescope::ui {
namespace {

// Milliseconds since boot at which this process started (/proc/self/stat field 22, in clock
// ticks), or -1 when unreadable.
double processStartMs() {
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  for (int k = 3; k <= 22 && fields >> f; ++k) {
    if (k == 22) return std::strtod(f.c_str(), nullptr) * 1000.0 / sysconf(_SC_CLK_TCK);
  }
  return -1;
}

double bootMs() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// "VmRSS:    123456 kB" -> MB.
double statusMb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return std::strtod(line.c_str() + key.size(), nullptr) / 1024.0;
  return -1;
}

const double kStartMs = processStartMs();

// Why the timing log may not be written at `path` ("" when it may): like every output of
// stagescope (docs/commands.md "Output files"), it replaces only an empty file or an earlier
// timing log (its first line "<ms> phase <name> <cpu>"), never a directory, link, special file
// or any other file.
std::string refusedLogPath(const char* path) {
  struct stat st {};
  if (::lstat(path, &st) != 0) return "";  // nothing there (or fopen says why)
  if (S_ISLNK(st.st_mode))
    return "is a symbolic link; expected a new file or an earlier timing log";
  if (!S_ISREG(st.st_mode))
    return "is not a regular file; expected a new file or an earlier timing log";
  if (st.st_size == 0) return "";
  std::ifstream in(path);
  std::string ms, word;
  in >> ms >> word;
  char* end = nullptr;
  std::strtod(ms.c_str(), &end);
  if (!ms.empty() && end == ms.c_str() + ms.size() && word == "phase") return "";
  return "exists and is not a viewer timing log (stagescope replaces only its own)";
}

}  // namespace

ViewerTiming::ViewerTiming() {
  const char* where = std::getenv("STAGESCOPE_GUI_TIMING");
  if (!where || !*where) return;
  if (std::strcmp(where, "-") == 0) {
    out_ = stderr;
    return;
  }
  if (const std::string refused = refusedLogPath(where); !refused.empty()) {
    std::fprintf(stderr, "STAGESCOPE_GUI_TIMING: %s: %s; the viewer runs without its timing log\n",
                 events::printableLine(where).c_str(), refused.c_str());
    return;
  }
  out_ = std::fopen(where, "w");
  ownsFile_ = out_ != nullptr;
  if (!out_)
    std::fprintf(stderr, "STAGESCOPE_GUI_TIMING: cannot write %s: %s\n",
                 events::printableLine(where).c_str(), std::strerror(errno));
}

ViewerTiming::~ViewerTiming() {
  if (ownsFile_) std::fclose(out_);
}

double ViewerTiming::sinceStartMs() const {
  return kStartMs < 0 ? -1 : bootMs() - kStartMs;
}

void ViewerTiming::phase(const char* name) {
  if (!out_) return;
  const std::string key = std::string(name) + ";";
  if (seen_.find(key) != std::string::npos) return;
  seen_ += key;
  // The process's CPU seconds so far (all threads, user + system): on a shared machine the
  // wall time says how long the user waited, the CPU time what the viewer itself cost.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  // And the resident memory then (MB): what the timeline alone holds, what the details add.
  std::fprintf(out_, "%.1f phase %s %.2f %.1f\n", sinceStartMs(), name, cpu, statusMb("VmRSS:"));
  std::fflush(out_);
}

void ViewerTiming::frame(double cpuMs, double wallMs, const char* state, double threadCpuMs) {
  if (out_)
    std::fprintf(out_, "%.1f frame %.3f %.3f %s %.3f\n", sinceStartMs(), cpuMs, wallMs, state,
                 threadCpuMs);
}

double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

void ViewerTiming::memory() {
  if (!out_) return;
  std::fprintf(out_, "%.1f memory %.1f %.1f\n", sinceStartMs(), statusMb("VmRSS:"),
               statusMb("VmHWM:"));
  std::fflush(out_);
}

}  // namespace stagescope::ui
