// Writing a report file so that nothing is lost on the way: the text goes to a temporary file
// next to the target, which replaces the target only once it is complete (rename).  A full
// disk, a size limit or a signal (SIGINT/SIGTERM/SIGHUP) during the write leaves the earlier
// report untouched and no temporary file behind.
//
// Signals: while a temporary file exists, a handler for SIGINT/SIGTERM/SIGHUP (those the
// process does not ignore) removes it, puts back the signal's previous action and raises the
// signal again - so the process dies of it as it would have (exit status 128 + sig: 130, 143,
// 129), or the program's own handler runs.  The three signals are blocked on the writing
// thread from before the file is created until the handler is installed, and around the
// rename and the removal, so no moment exists at which a signal leaves the file behind; `path`
// is then either untouched or the complete report.
#pragma once

#include <cstdio>
#include <string>

namespace stagescope::report {

// A file being written in place of `path`: ".<name>.tmp-<pid>" in the same directory, created
// exclusively.  commit() makes it `path`; destroying it uncommitted removes it.  One at a
// time per process (a second one at once throws std::logic_error).  Errors throw
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

// The path that means standard output for a report option that takes it (`check --json -`;
// which ones: storage/OutputPolicy.h).
inline constexpr char kStandardOutput[] = "-";
inline bool isStandardOutput(const std::string& path) {
  return path == kStandardOutput;
}

// Writes text to path whole (binary) through an AtomicFile; `-` (kStandardOutput): to standard
// output, flushed (throws std::runtime_error when it cannot be written).
void writeTextFile(const std::string& path, const std::string& text);

}  // namespace stagescope::report
