// ViewerTiming: what a user of `stagescope gui FILE` waits for, measured inside the process.
//
// Enabled by the environment variable STAGESCOPE_GUI_TIMING=PATH (or "-" for stderr).  Each
// line is "<ms since the process started> <event> [values]":
//   <t> phase <name> <process CPU s> <VmRSS MB>   names, in order: main, glfw-init, opened,
//                                                 gl-context, window, first-frame,
//                                                 first-useful-frame, interactive, loaded
//   <t> frame <cpu ms> <wall ms> <loading|details|out|in> <thread cpu ms>   one per frame
//       (cpu: NewFrame..Render in wall time, so preemption counts; wall: the whole loop, GL and
//       swap included; thread cpu: the CPU time the UI thread itself spent in NewFrame..Render)
//   <t> memory <VmRSS MB> <VmHWM MB>                at exit
// "first-useful-frame" is the first frame that drew the run (its overview or its actions);
// "interactive" the first frame with the run's timeline (the details still loading: frames
// "details"); "loaded" the first frame with the whole run.  A frame is "out" while the view
// spans at least half the run, "in" otherwise.  The process start is /proc/self/stat's start time,
// so the dynamic loader and static initialisation count.  ImGui-free.
#pragma once

#include <cstdio>
#include <string>

namespace stagescope::ui {

// The calling thread's CPU time in ms (CLOCK_THREAD_CPUTIME_ID).
double threadCpuMs();

class ViewerTiming {
 public:
  ViewerTiming();  // reads STAGESCOPE_GUI_TIMING; disabled when unset
  ~ViewerTiming();
  ViewerTiming(const ViewerTiming&) = delete;
  ViewerTiming& operator=(const ViewerTiming&) = delete;

  bool enabled() const { return out_ != nullptr; }
  // Logs the phase the first time it is called with that name.
  void phase(const char* name);
  void frame(double cpuMs, double wallMs, const char* state, double threadCpuMs);
  void memory();

 private:
  double sinceStartMs() const;
  std::FILE* out_ = nullptr;
  bool ownsFile_ = false;
  std::string seen_;  // phases logged so far, ";"-separated
};

}  // namespace stagescope::ui
