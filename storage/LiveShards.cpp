#include "storage/LiveShards.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <system_error>

namespace stagescope::storage {

namespace fs = std::filesystem;

namespace {

// "dev:ino" of a file, or "" when it cannot be stat()ed: the identity /proc's fd links are
// compared by (a path may be spelled many ways; the link is the canonical one).
std::string identityOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

}  // namespace

std::vector<LiveShard> liveShards(const std::vector<std::string>& paths) {
  std::map<std::string, size_t> wanted;  // identity -> position in `paths`
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string id = identityOf(paths[i]);
    if (!id.empty()) wanted.emplace(id, i);
  }
  std::vector<int> holder(paths.size(), -1);
  if (wanted.empty()) return {};
  DIR* proc = ::opendir("/proc");
  if (!proc) return {};
  const int self = static_cast<int>(::getpid());
  while (const dirent* e = ::readdir(proc)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == self) continue;
    const std::string fdDir = "/proc/" + std::string(e->d_name) + "/fd";
    std::error_code ec;
    for (fs::directory_iterator it(fdDir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string id = identityOf(it->path().string());  // stat() follows the fd link
      auto w = wanted.find(id);
      if (w != wanted.end() && holder[w->second] < 0) holder[w->second] = pid;
    }
  }
  ::closedir(proc);
  std::vector<LiveShard> out;
  for (size_t i = 0; i < paths.size(); ++i)
    if (holder[i] >= 0) out.push_back({paths[i], holder[i]});
  return out;
}

std::string describeWriter(const LiveShard& s) {
  char host[256] = "this host";
  ::gethostname(host, sizeof host - 1);
  return "being written by pid " + std::to_string(s.pid) + " on host " + host;
}

}  // namespace stagescope::storage
