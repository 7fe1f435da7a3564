// One slot of the viewer (the main run or the compare run): a run being loaded on background
// threads and handed over, phase by phase, to the UI thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ui/LoadedRun.h"
#include "ui/RunComparison.h"

namespace stagescope::ui {

// One run being loaded on background threads, in phases (LoadedRun.h): the timeline (then
// `run` is set: interactive), the details, the verdicts (then run->detailsLoaded).  The details
// are read on a second thread started together with the timeline's (separate SQLite
// connections; only the hand-over of results is shared, under `mutex_`); the verdicts run on a
// thread started once the details are merged.  poll(), on the UI thread, takes a finished phase
// over (the details only after the timeline) and starts the next, so that only the UI thread
// ever modifies the run, and only while no other thread reads it.
class RunSlot {
 public:
  ~RunSlot();
  // Loads `path`; with `compareWith`, also compares it against that run (the compare slot: one
  // phase, the whole run, then the comparison).
  void load(const std::string& path, std::shared_ptr<const LoadedRun> compareWith = {});
  enum class Change {
    None,
    Opened,   // `run` is set (the timeline: interactive; the compare slot: the whole run)
    Details,  // run->detailsLoaded became true
    Failed,   // `error` is set (`run` stays as it was when the details failed)
  };
  // Takes a finished phase over and starts the next.  While `holdTimeline` a finished first
  // phase is not taken over; while `holdDetails` finished details are not (for tests of those
  // states, which otherwise last as long as the load happens to take).
  Change poll(bool holdTimeline = false, bool holdDetails = false);
  // True from load() until poll() has taken the last phase over (not merely until a loading
  // thread finished): a script command must never run between the two.
  bool loading() const { return phase_ != Phase::Idle; }
  // The timeline is in and the details are still loading.
  bool detailsPending() const { return run && !run->detailsLoaded && loading(); }
  // The current phase's progress in [0, 1]: the timeline's read and index; then the details'
  // read (0 to 0.9, already advanced while the timeline loaded) and their judging (0.95).
  float progress() const { return phase_ == Phase::Details ? detailsProgress_ : progress_; }
  void close();
  // Called from the loading thread when a phase has finished (the host wakes its event loop,
  // which may be waiting for input); set before load().
  std::function<void()> wake;

  std::string path;
  std::shared_ptr<const LoadedRun> run;
  std::shared_ptr<const analysis::Comparison> comparison;  // compare slot: against the main run
  std::shared_ptr<const LoadedRun> comparedWith;  // the main run `comparison` was computed for
  std::string error;

 private:
  enum class Phase { Idle, Timeline, Details, Verdicts };
  // Stops the running phase and the details read (their threads end at their next progress
  // report) and joins them.
  void stop();
  void start(Phase phase, std::function<void()> work);
  // Starts reading the details of `path` on detailsThread_ (LoadedRun.h readDetails).
  void startDetails(const std::string& path);
  // Runs `work`, returning "" or what it threw as one line ("cancelled" when stopped).
  std::string attempt(const std::function<void()>& work);

  Phase phase_ = Phase::Idle;
  std::shared_ptr<LoadedRun> owned_;  // == run: the slot's own handle, the only one that writes
  std::thread thread_;
  std::atomic<float> progress_{0};
  std::atomic<bool> finished_{false}, cancel_{false};
  std::thread detailsThread_;  // the details read, from load() until the details phase ends
  std::atomic<float> detailsProgress_{0};
  std::atomic<bool> detailsFinished_{false};
  std::string resultDetailsError_;
  std::mutex mutex_;
  std::shared_ptr<LoadedRun> result_;
  std::shared_ptr<const analysis::Comparison> resultComparison_;
  std::optional<model::RunModel> resultDetails_;
  std::optional<RunProblems> resultProblems_;
  std::string resultError_;
  std::chrono::steady_clock::time_point detailsStart_;
};

}  // namespace stagescope::ui
