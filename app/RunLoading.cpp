#include "app/RunLoading.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "app/report/Progress.h"
#include "storage/RunLiveness.h"

namespace stagescope::app {
namespace {

// One progress indicator fed by several loading threads: the mean of their fractions, drawn
// once loading has taken half a second.
class SharedProgress {
 public:
  SharedProgress(std::string label, size_t parts) : label_(std::move(label)), parts_(parts) {}

  void update(size_t part, float fraction) {
    const std::lock_guard<std::mutex> lock(mutex_);
    parts_[part] = fraction;
    if (!progress_ && std::chrono::steady_clock::now() - start_ > std::chrono::milliseconds(500)) {
      progress_.emplace(label_, 1000);
    }
    if (!progress_) return;
    float sum = 0;
    for (float f : parts_) sum += f;
    progress_->update(static_cast<uint64_t>(sum / static_cast<float>(parts_.size()) * 1000));
  }

  void finish() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (progress_) progress_->finish();
  }

 private:
  std::mutex mutex_;
  std::string label_;
  std::vector<float> parts_;
  std::optional<report::Progress> progress_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

model::RunModel loadWithProgress(const std::string& path, storage::LoadOptions opts,
                                 model::LiveState* live) {
  SharedProgress progress("loading " + path, 1);
  auto model = storage::loadObserved(
      path, opts, [&](float f) { progress.update(0, f); }, live);
  progress.finish();
  return model;
}

std::pair<model::RunModel, model::RunModel> loadTwoWithProgress(const std::string& a,
                                                                const std::string& b,
                                                                storage::LoadOptions opts) {
  return loadTwoWithProgress(a, b, opts, opts);
}

std::pair<model::RunModel, model::RunModel> loadTwoWithProgress(
    const std::string& a, const std::string& b, storage::LoadOptions optsA,
    storage::LoadOptions optsB, model::LiveState* liveA, model::LiveState* liveB) {
  SharedProgress progress("loading " + a + " and " + b, 2);
  model::RunModel ma, mb;
  std::exception_ptr errorA, errorB;
  std::thread second([&] {
    try {
      mb = storage::loadObserved(
          b, optsB, [&](float f) { progress.update(1, f); }, liveB);
    } catch (...) {
      errorB = std::current_exception();
    }
  });
  try {
    ma = storage::loadObserved(
        a, optsA, [&](float f) { progress.update(0, f); }, liveA);
  } catch (...) {
    errorA = std::current_exception();
  }
  second.join();
  if (errorA) std::rethrow_exception(errorA);
  if (errorB) std::rethrow_exception(errorB);
  progress.finish();
  return {std::move(ma), std::move(mb)};
}

void keepUntilExit(model::RunModel&& model) {
  static auto* kept = new std::vector<std::unique_ptr<model::RunModel>>();  // never freed
  kept->push_back(std::make_unique<model::RunModel>(std::move(model)));
}

}  // namespace stagescope::app
