#include "app/capture/HangWatchdog.h"

#include <algorithm>
#include <vector>

#include "core/engine/Clock.h"

namespace stagescope::capture {

namespace {
constexpr int64_t kNsPerMs = 1000000;

// How often the thread looks at an op of this timeout: a quarter of it, 10 ms .. 1 s.
std::chrono::milliseconds pollPeriod(std::chrono::milliseconds timeout) {
  return std::clamp(std::chrono::milliseconds(timeout / 4), std::chrono::milliseconds(10),
                    std::chrono::milliseconds(1000));
}
}  // namespace

HangWatchdog::HangWatchdog(Report report) : report_(std::move(report)) {
  thread_ = std::thread([this] { run(); });
}

HangWatchdog::~HangWatchdog() {
  stop();
}

uint64_t HangWatchdog::add(PendingOp op) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_++;
  // Wake the thread only when this op needs a shorter poll than the one it sleeps in: a wake
  // per posted op was a context switch per op on the job's cores.
  const bool sooner = pollPeriod(op.timeout) < sleeping_;
  ops_[id].op = std::move(op);
  if (sooner) cv_.notify_one();
  return id;
}

void HangWatchdog::blocked(uint64_t id, bool inWait) {
  std::lock_guard lock(mu_);
  auto it = ops_.find(id);
  if (it == ops_.end()) return;
  Entry& e = it->second;
  if (inWait) {
    if (e.waiters++ == 0) e.waitStartNs = engine::nowNs();
  } else if (e.waiters > 0 && --e.waiters == 0) {
    e.waitStartNs = 0;
  }
}

bool HangWatchdog::done(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = ops_.find(id);
  if (it == ops_.end()) return false;
  const bool reported = it->second.reported;
  ops_.erase(it);
  return reported;
}

void HangWatchdog::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

size_t HangWatchdog::pending() const {
  std::lock_guard lock(mu_);
  return ops_.size();
}

std::vector<PendingOp> HangWatchdog::pendingOps() const {
  std::lock_guard lock(mu_);
  std::vector<PendingOp> out;
  out.reserve(ops_.size());
  for (const auto& [id, e] : ops_) out.push_back(e.op);  // ids grow with posting order
  return out;
}

std::vector<HangWatchdog::Entry> HangWatchdog::takeStuck(int64_t now) {
  bool anyBlocked = false;
  for (const auto& [id, e] : ops_) anyBlocked = anyBlocked || e.waiters > 0;
  std::vector<Entry> stuck;
  for (auto& [id, e] : ops_) {
    if (e.reported) continue;
    const int64_t limit = e.op.timeout.count() * kNsPerMs;
    // A blocked wait is what the rank waits on; an unwaited operation counts only while the
    // job waits on nothing we can see (it may wait on a future or poll is_completed()).
    const int64_t since = e.waiters > 0 ? e.waitStartNs : anyBlocked ? 0 : e.op.postNs;
    if (since == 0 || now - since < limit) continue;
    e.reported = true;
    stuck.push_back(e);
    stuck.back().waitStartNs = now - since;  // reused: how long it has been stuck
  }
  return stuck;
}

void HangWatchdog::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    // Poll at a quarter of the shortest pending timeout (10 ms .. 1 s): a stuck operation is
    // reported at most 25 % after its timeout.
    auto period = std::chrono::milliseconds(1000);
    for (const auto& [id, e] : ops_) {
      if (!e.reported) period = std::min(period, pollPeriod(e.op.timeout));
    }
    sleeping_ = period;
    cv_.wait_for(lock, period);
    sleeping_ = std::chrono::milliseconds(0);  // awake: add() need not wake it
    if (stopping_) break;
    std::vector<Entry> stuck = takeStuck(engine::nowNs());
    if (stuck.empty()) continue;
    lock.unlock();  // reporting writes to the shard; the job's threads must not wait on it
    for (auto& e : stuck) {
      if (e.op.onStuck) e.op.onStuck();
      report_(e.op.wait, e.op.what, e.waitStartNs);
    }
    lock.lock();
  }
}

}  // namespace stagescope::capture
