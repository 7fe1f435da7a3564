// DigestWorker: the checksums and statistics of captured payloads, computed off the job's
// thread.
//
// At level stats and above every recorded payload is digested (engine::digest: XXH3-64 of the
// bytes, then min/max/mean/l2/NaN/Inf in float64).  Doing that on the thread that called the
// c10d op charges the job's step time for it; instead the calling thread only copies the bytes
// (a Snapshot: one memcpy of a contiguous CPU tensor) at the moment they are defined, and one
// background thread digests the copy and writes the op's records.
//
// When the bytes are taken (the contract that keeps checksums equal to the inline digest):
//   * a send's at post, before the inner backend sees the tensor (what was sent);
//   * a receive's when the op is known complete (RecordingWork's first wait(), or the Work's
//     release), before the job can reuse the buffer;
//   * a collective's inputs at post, its outputs at completion.
// A copy is never a reference to the job's tensor: the job may overwrite its buffer as soon as
// wait() returns (or earlier through a future), the snapshot stays what it was.
//
// Jobs run in submission order on one thread, so each rank's rows reach the shard writer in the
// order the ops completed.  Back-pressure: while more than kMaxQueuedBytes of snapshots wait,
// submit() blocks (the job is then charged for the digests it outruns, never for unbounded
// memory).  drain() returns once every submitted job ran; the session drains before a flush
// that must be durable (a hang, a failure) and before closing the shard.
//
// STAGESCOPE_DIGEST_INLINE=1 runs every job on the submitting thread instead (the behaviour
// before this worker existed), so the benchmark measures both in one invocation
// (tests/capture/bench_capture.py, variant stats-inline).
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/engine/TensorDigest.h"

namespace stagescope::capture {

// The bytes of one or more tensors at one moment, with what is needed to digest them.
struct Snapshot {
  std::vector<uint8_t> bytes;  // contiguous host bytes
  at::ScalarType dtype = at::kByte;
  int64_t numel = 0;
  bool empty() const { return numel == 0 && bytes.empty(); }
};

// The bytes of `t` now (copied to the host when it lives elsewhere).
Snapshot snapshotOf(const at::Tensor& t);
// The bytes of all `tensors` in order as one buffer when they share a dtype (all_gather outputs,
// coalesced ops), else of the first: what RecordingBackend digests as "all".
Snapshot snapshotOfAll(const std::vector<at::Tensor>& tensors);
// engine::digest of the snapshot's bytes: the same checksum and statistics as digesting the
// tensor it was taken from.
engine::TensorDigest digestOf(const Snapshot& s);

class DigestWorker {
 public:
  static constexpr size_t kMaxQueuedBytes = size_t{256} << 20;
  static DigestWorker& instance();

  // Runs `job` on the worker thread after every job submitted before it; `bytes` is the size of
  // the snapshots it owns (for back-pressure).  `job` must not throw (a throw is reported on
  // stderr once and the job dropped).
  void submit(std::function<void()> job, size_t bytes);
  // Blocks until every job submitted so far has run.
  void drain();

 private:
  DigestWorker();
  void loop();

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::deque<std::pair<std::function<void()>, size_t>> queue_;
  size_t queuedBytes_ = 0;
  uint64_t submitted_ = 0, finished_ = 0;
  bool started_ = false;
  bool inline_ = false;  // STAGESCOPE_DIGEST_INLINE=1, read when the worker is created
  bool reportedThrow_ = false;
  std::thread thread_;
};

}  // namespace stagescope::capture
