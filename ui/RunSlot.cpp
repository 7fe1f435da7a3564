// A run's phased background load (RunSlot.h).
#include "ui/RunSlot.h"

#include <exception>
#include <utility>

namespace stagescope::ui {

namespace {
// Thrown from a progress report to end a phase that is no longer wanted (another run opened,
// the slot closed, the viewer quit): the reader unwinds and closes the file.
struct Cancelled {};
}  // namespace

RunSlot::~RunSlot() {
  stop();
}

void RunSlot::stop() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
  if (detailsThread_.joinable()) detailsThread_.join();
  cancel_ = false;
  phase_ = Phase::Idle;
  std::lock_guard<std::mutex> lock(mutex_);
  resultDetails_.reset();
  resultDetailsError_.clear();
}

std::string RunSlot::attempt(const std::function<void()>& work) {
  try {
    work();
  } catch (const Cancelled&) {
    return "cancelled";
  } catch (const storage::RunFileError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return path + ": " + e.what();
  }
  return {};
}

void RunSlot::start(Phase phase, std::function<void()> work) {
  phase_ = phase;
  finished_ = false;
  progress_ = 0;
  thread_ = std::thread([this, work = std::move(work)] {
    std::string err = attempt(work);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      resultError_ = std::move(err);
      finished_ = true;
    }
    if (wake) wake();
  });
}

void RunSlot::startDetails(const std::string& p) {
  detailsFinished_ = false;
  detailsProgress_ = 0;
  detailsThread_ = std::thread([this, p] {
    std::string err = attempt([this, &p] {
      model::RunModel details = readDetails(p, [this](float f) {
        if (cancel_) throw Cancelled{};
        detailsProgress_ = 0.9f * f;
      });
      std::lock_guard<std::mutex> lock(mutex_);
      resultDetails_ = std::move(details);
    });
    {
      std::lock_guard<std::mutex> lock(mutex_);
      resultDetailsError_ = std::move(err);
      detailsFinished_ = true;
    }
    if (wake) wake();
  });
}

void RunSlot::load(const std::string& p, std::shared_ptr<const LoadedRun> compareWith) {
  stop();
  path = p;
  comparedWith = compareWith;
  error.clear();
  // A run whose details were still loading would stay without them (stop() ended that phase):
  // it goes now; a whole run stays on screen until the new one is in (or failed to open).
  if (run && !run->detailsLoaded) {
    run.reset();
    owned_.reset();
  }
  auto report = [this](float f) {
    if (cancel_) throw Cancelled{};
    progress_ = f;
  };
  detailsStart_ = std::chrono::steady_clock::now();
  start(Phase::Timeline, [this, p, compareWith, report] {
    std::shared_ptr<LoadedRun> loaded;
    std::shared_ptr<const analysis::Comparison> compared;
    if (compareWith) {  // the compare slot: the whole run, then the comparison
      loaded = openRun(p, report);
      compared = compareForViewer(*compareWith, *loaded);
    } else {
      loaded = openTimeline(p, report);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = std::move(loaded);
    resultComparison_ = std::move(compared);
  });
  // The main slot reads the details at the same time (the second core is otherwise idle while
  // the timeline loads); poll() takes them over only once the timeline is in.
  if (!compareWith) startDetails(p);
}

RunSlot::Change RunSlot::poll(bool holdTimeline, bool holdDetails) {
  if (phase_ == Phase::Idle) return Change::None;
  if (!(phase_ == Phase::Details ? detailsFinished_ : finished_)) return Change::None;
  if (phase_ == Phase::Timeline ? holdTimeline : holdDetails) return Change::None;
  std::thread& finished = phase_ == Phase::Details ? detailsThread_ : thread_;
  finished.join();
  const Phase done = phase_;
  phase_ = Phase::Idle;
  {
    // Only the finished phase's error: the details read runs alongside the timeline's, and an
    // error it ended with before the timeline was in must still be there when its phase ends
    // (clearing it here took a failed details read for a finished one, and the viewer then
    // moved from an empty result: a crash on a damaged run file).
    std::lock_guard<std::mutex> lock(mutex_);
    std::string& finishedError = done == Phase::Details ? resultDetailsError_ : resultError_;
    error = std::move(finishedError);
    finishedError.clear();
  }
  if (!error.empty()) {
    stop();  // a failed timeline: the details read is cancelled, joined and its result dropped
    resultProblems_.reset();
    if (done != Phase::Timeline) error = path + ": the details could not be read: " + error;
    return Change::Failed;
  }
  switch (done) {
    case Phase::Timeline: {
      std::lock_guard<std::mutex> lock(mutex_);
      owned_ = std::move(result_);
      run = owned_;
      comparison = std::move(resultComparison_);
      if (owned_->detailsLoaded) return Change::Opened;  // the compare slot's whole run
      phase_ = Phase::Details;  // the details read started with the timeline's
      // Details read before the timeline (a message-heavy run): their thread's wake-up was
      // spent, and the loop would pause for its loading frame rate (up to 1 s) before taking
      // them; wake it for the next frame instead.
      if (detailsFinished_ && wake) wake();
      return Change::Opened;
    }
    case Phase::Details: {
      // Both reads are done and no other thread reads the run now: check that the details
      // are the same run's, merge, then judge the whole model on a thread (the UI thread
      // keeps drawing it meanwhile; both only read).
      model::RunModel details;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!resultDetails_) {  // never without an error (above); said rather than assumed
          error = path + ": the details could not be read (the read ended without a result)";
          return Change::Failed;
        }
        details = std::move(*resultDetails_);
        resultDetails_.reset();
      }
      try {
        checkSameRun(*owned_, details);
      } catch (const storage::RunFileError& e) {
        error = path + ": the details could not be read: " + e.what();
        return Change::Failed;
      }
      mergeDetails(*owned_, std::move(details));
      std::shared_ptr<const LoadedRun> whole = owned_;
      start(Phase::Verdicts, [this, whole] {
        RunProblems problems = judgeRun(*whole);
        std::lock_guard<std::mutex> lock(mutex_);
        resultProblems_ = std::move(problems);
      });
      progress_ = 0.95f;
      return Change::None;
    }
    case Phase::Verdicts:
      completeDetails(*owned_, std::move(*resultProblems_));
      resultProblems_.reset();
      owned_->detailsSeconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - detailsStart_).count();
      return Change::Details;
    case Phase::Idle:
      break;
  }
  return Change::None;
}

void RunSlot::close() {
  stop();
  run.reset();
  owned_.reset();
  comparison.reset();
  comparedWith.reset();
  error.clear();
  path.clear();
}

}  // namespace stagescope::ui
