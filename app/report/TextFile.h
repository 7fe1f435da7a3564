// Writing a report file so that nothing is lost on the way: the text goes to a temporary file
// next to the target, which replaces the target only once it is complete (rename).  A full
// disk, a size limit or a signal (SIGINT/SIGTERM/SIGHUP) during the write leaves the earlier
// report untouched and no temporary file behind.
#pragma once

#include <cstdio>
#include <string>

namespace stagescope::report {

// A file being written in place of `path`: ".<name>.tmp-<pid>" in the same directory, created
// exclusively.  commit() makes it `path`; destroying it uncommitted removes it.  Errors throw
// std::runtime_error: "cannot write '<path>': <system reason>; <path> was not changed".
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const char* data, size_t size);
  void commit();  // flush, close, then rename over `path`

 private:
  [[noreturn]] void fail(int err, const char* what);
  std::string path_, temp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

// Writes text to path whole (binary) through an AtomicFile.
void writeTextFile(const std::string& path, const std::string& text);

}  // namespace stagescope::report
