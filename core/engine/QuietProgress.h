// What `run --quiet` still shows: the run's progress.  --quiet stops the ranks' output from
// being forwarded, which left a long run silent on a terminal until it ended.  The progress
// line rank 0 of the llm prints after each iteration ("iteration 4  loss 0.52  time 0.21 s
// (5/200, 41 s left)", app/WorkerCommand.cpp) is redrawn in place as one line on a terminal;
// when standard output is not a terminal nothing is shown (the documented quiet).
#pragma once

#include <cstdio>
#include <string>

namespace stagescope::engine {

// Whether `line` is a rank's progress line; its "N/total" into *done and *total.
bool parseProgressLine(const std::string& line, int* done, int* total);

class QuietProgress {
 public:
  // Shows only when `out` is a terminal (tty: -1 = ask isatty, 0 = never, 1 = always).
  explicit QuietProgress(FILE* out = stdout, int tty = -1);
  // A line of rank `rank`'s standard output: redrawn when it is a progress line.
  void line(int rank, const std::string& text);
  // Ends the redrawn line (a newline), if one was drawn.
  void finish();

 private:
  FILE* out_;
  bool tty_ = false;
  bool drawn_ = false;
};

}  // namespace stagescope::engine
