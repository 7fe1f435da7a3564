#include "core/engine/ElasticErrorFile.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

namespace stagescope::engine {
namespace {

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

bool writeElasticErrorFile(const std::string& path, const std::string& message) {
  if (path.empty()) return false;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const std::string m = jsonString(message);
  const std::string text = "{\"message\": {\"message\": " + m +
                           ", \"extraInfo\": {\"py_callstack\": " + m + ", \"timestamp\": \"" +
                           std::to_string(static_cast<long long>(std::time(nullptr))) + "\"}}}\n";
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

}  // namespace stagescope::engine
