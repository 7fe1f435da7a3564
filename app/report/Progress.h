// A progress indicator for long commands (loading a big run, comparing, exporting, merging): a
// redrawn bar with N/total, the rate and the time left on a terminal; plain lines at every
// 10 % otherwise, with the same figures (CI logs stay readable).
//
//   Progress p("loading run.db", total);
//   for (...) p.update(done);
//   p.finish();
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace stagescope::report {

class Progress {
 public:
  // tty: -1 = detect with isatty(out), 0 = plain lines, 1 = bar.  quietForSeconds: nothing is
  // shown until the work has taken that long (a step that ends sooner leaves no line).
  Progress(std::string label, uint64_t total, FILE* out = stderr, int tty = -1,
           double quietForSeconds = 0)
      : label_(std::move(label)), total_(total), out_(out), quietFor_(quietForSeconds) {
    tty_ = tty < 0 ? (out_ && isatty(fileno(out_)) == 1) : tty == 1;
    start_ = std::chrono::steady_clock::now();
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() { finish(); }

  void setTotal(uint64_t total) { total_ = total; }

  // Cheap to call often: redraws at most 10 times a second (TTY) or every 10 % (plain).
  void update(uint64_t done) {
    if (finished_ || !out_) return;
    done_ = done;
    if (!shown_ && quietFor_ > 0 && elapsed() < quietFor_) return;
    shown_ = true;
    int pct = total_ ? static_cast<int>(100.0 * static_cast<double>(done) / total_) : 0;
    if (pct > 100) pct = 100;
    if (tty_) {
      auto now = std::chrono::steady_clock::now();
      if (drawn_ && now - lastDraw_ < std::chrono::milliseconds(100)) return;
      lastDraw_ = now;
      drawn_ = true;
      draw(pct);
    } else if (pct / 10 > lastDecile_) {
      lastDecile_ = pct / 10;
      std::fprintf(out_, "%s: %d%% (%llu/%llu%s)\n", label_.c_str(), pct,
                   static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
                   pace().c_str());
      std::fflush(out_);
    }
  }

  // Final line with the elapsed time; idempotent.
  void finish(const std::string& note = "") {
    if (finished_ || !out_) return;
    finished_ = true;
    if (!shown_ && quietFor_ > 0 && elapsed() < quietFor_) return;
    const double s = elapsed();
    if (tty_) {
      done_ = total_;
      draw(100);
      std::fprintf(out_, " %.2fs%s%s\n", s, note.empty() ? "" : " ", note.c_str());
    } else {
      std::fprintf(out_, "%s: done in %.2fs%s%s\n", label_.c_str(), s, note.empty() ? "" : " ",
                   note.c_str());
    }
    std::fflush(out_);
  }

  bool isTty() const { return tty_; }

 private:
  void draw(int pct) {
    constexpr int kWidth = 30;
    int fill = pct * kWidth / 100;
    std::string bar(static_cast<size_t>(fill), '#');
    bar.append(static_cast<size_t>(kWidth - fill), '.');
    // \033[K clears what a longer earlier line left on the right.
    std::fprintf(out_, "\r%s [%s] %3d%% %llu/%llu%s\033[K", label_.c_str(), bar.c_str(), pct,
                 static_cast<unsigned long long>(done_), static_cast<unsigned long long>(total_),
                 pace().c_str());
    std::fflush(out_);
  }

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // ", 2.5/s, 4 s left" at the mean pace so far; empty before the first step is done.
  std::string pace() const {
    const double s = elapsed();
    if (done_ == 0 || s <= 0 || done_ >= total_) return "";
    const double rate = static_cast<double>(done_) / s;
    char text[64];
    std::snprintf(text, sizeof text, ", %.3g/s, %.0f s left", rate,
                  static_cast<double>(total_ - done_) / rate);
    return text;
  }

  std::string label_;
  uint64_t total_ = 0, done_ = 0;
  FILE* out_ = nullptr;
  double quietFor_ = 0;
  bool tty_ = false, drawn_ = false, finished_ = false, shown_ = false;
  int lastDecile_ = -1;
  std::chrono::steady_clock::time_point start_, lastDraw_;
};

}  // namespace stagescope::report
