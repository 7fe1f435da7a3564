#include "core/engine/QuietProgress.h"

#include <unistd.h>

#include <cstdio>

namespace stagescope::engine {

bool parseProgressLine(const std::string& line, int* done, int* total) {
  if (line.rfind("iteration ", 0) != 0) return false;
  const size_t open = line.rfind('(');
  if (open == std::string::npos) return false;
  int n = 0, t = 0;
  if (std::sscanf(line.c_str() + open, "(%d/%d,", &n, &t) != 2 || n < 0 || t <= 0) return false;
  *done = n;
  *total = t;
  return true;
}

QuietProgress::QuietProgress(FILE* out, int tty) : out_(out) {
  tty_ = tty < 0 ? (out_ && isatty(fileno(out_)) == 1) : tty == 1;
}

void QuietProgress::line(int rank, const std::string& text) {
  int done = 0, total = 0;
  if (!tty_ || !parseProgressLine(text, &done, &total)) return;
  // \r and erase to the end of the line: one line, redrawn.
  std::fprintf(out_, "\r[rank %d] %s\033[K", rank, text.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void QuietProgress::finish() {
  if (!drawn_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace stagescope::engine
