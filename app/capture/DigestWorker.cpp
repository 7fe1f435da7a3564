#include "app/capture/DigestWorker.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

namespace stagescope::capture {

Snapshot snapshotOf(const at::Tensor& t) {
  Snapshot s;
  const at::Tensor d = t.detach();
  s.dtype = d.scalar_type();
  s.numel = d.numel();
  if (d.device().is_cpu() && d.is_contiguous()) {
    // The common case: one memcpy, no dispatcher call.
    const auto* p = static_cast<const uint8_t*>(d.data_ptr());
    if (d.nbytes() > 0) s.bytes.assign(p, p + d.nbytes());
  } else {
    s.bytes = engine::hostBytes(d);
  }
  return s;
}

Snapshot snapshotOfAll(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return {};
  if (tensors.size() == 1) return snapshotOf(tensors[0]);
  for (const auto& t : tensors)
    if (t.scalar_type() != tensors[0].scalar_type()) return snapshotOf(tensors[0]);
  Snapshot all;
  all.dtype = tensors[0].scalar_type();
  for (const auto& t : tensors) {
    Snapshot one = snapshotOf(t);
    all.numel += one.numel;
    all.bytes.insert(all.bytes.end(), one.bytes.begin(), one.bytes.end());
  }
  return all;
}

engine::TensorDigest digestOf(const Snapshot& s) {
  // A view of the copy (no further copy): from_blob over the snapshot's contiguous bytes.
  auto* data = const_cast<uint8_t*>(s.bytes.data());
  static uint8_t none = 0;
  const at::Tensor view =
      at::from_blob(s.bytes.empty() ? &none : data, {s.numel}, at::TensorOptions().dtype(s.dtype));
  return engine::digest(view);
}

DigestWorker& DigestWorker::instance() {
  // Never destroyed, like the session: jobs may still be queued during static destruction.
  static auto* worker = new DigestWorker();
  return *worker;
}

DigestWorker::DigestWorker() {
  const char* v = std::getenv("STAGESCOPE_DIGEST_INLINE");
  inline_ = v && std::string(v) == "1";
}

void DigestWorker::submit(std::function<void()> job, size_t bytes) {
  if (inline_) {
    job();  // on the job's thread (the measured alternative)
    return;
  }
  std::unique_lock lock(mu_);
  if (!started_) {
    started_ = true;
    thread_ = std::thread([this] { loop(); });
    thread_.detach();
  }
  // Back-pressure: an oversized job alone is admitted once the queue is empty.
  done_.wait(lock, [&] { return queue_.empty() || queuedBytes_ + bytes <= kMaxQueuedBytes; });
  queue_.emplace_back(std::move(job), bytes);
  queuedBytes_ += bytes;
  ++submitted_;
  wake_.notify_one();
}

void DigestWorker::drain() {
  std::unique_lock lock(mu_);
  const uint64_t target = submitted_;
  done_.wait(lock, [&] { return finished_ >= target; });
}

void DigestWorker::loop() {
  for (;;) {
    std::pair<std::function<void()>, size_t> next;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return !queue_.empty(); });
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      next.first();
    } catch (const std::exception& e) {
      std::lock_guard lock(mu_);
      if (!reportedThrow_)
        std::fprintf(stderr, "stagescope backend: digest failed: %s\n", e.what());
      reportedThrow_ = true;
    }
    {
      std::lock_guard lock(mu_);
      queuedBytes_ -= next.second;
      ++finished_;
    }
    done_.notify_all();
  }
}

}  // namespace stagescope::capture
