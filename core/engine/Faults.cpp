#include "core/engine/Faults.h"

#include <ATen/ATen.h>

#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <limits>
#include <thread>

namespace stagescope::engine {

FaultInjector::FaultInjector(std::vector<plan::FaultConfig> faults, const plan::RunConfig& config,
                             int rank, const std::string& module, int stage)
    : rank_(rank), module_(module), stage_(stage), lastStage_(config.module(module).pp - 1) {
  for (auto& f : faults) {
    const bool mine =
        f.rank >= 0 ? f.rank == rank
                    : f.module == module && (f.stage < 0 ? stage == lastStage_ : f.stage == stage);
    if (mine) faults_.push_back(std::move(f));
  }
}

const plan::FaultConfig* FaultInjector::match(const events::TransferRecord& rec,
                                              plan::FaultKind kind) const {
  for (const auto& f : faults_) {
    if (f.kind != kind || f.iteration != rec.iteration || f.microbatch != rec.microbatch) continue;
    if (f.direction != rec.direction) continue;
    return &f;
  }
  return nullptr;
}

events::InjectedFaultRecord FaultInjector::matching(const events::TransferRecord& rec) const {
  events::InjectedFaultRecord out;
  out.rank = rec.srcRank;
  out.peer = rec.dstRank;
  out.iteration = rec.iteration;
  out.actionSeq = rec.actionSeq;
  using plan::FaultKind;
  for (FaultKind k : {FaultKind::Delay, FaultKind::Drop, FaultKind::Corrupt, FaultKind::Shape,
                      FaultKind::Nan, FaultKind::Inf}) {
    const auto* f = match(rec, k);
    if (!f) continue;
    out.kinds.push_back(plan::toString(k));
    if (k == FaultKind::Delay) out.delaySeconds = f->delaySeconds;
  }
  return out;
}

void FaultInjector::beforeDigest(const events::TransferRecord& rec, at::Tensor& payload) const {
  if (match(rec, plan::FaultKind::Nan)) {
    payload = payload.clone();
    payload.view({-1})[0] = std::numeric_limits<float>::quiet_NaN();
  }
  if (match(rec, plan::FaultKind::Inf)) {
    payload = payload.clone();
    payload.view({-1})[0] = std::numeric_limits<float>::infinity();
  }
}

bool FaultInjector::beforeSend(const events::TransferRecord& rec, at::Tensor& payload) const {
  if (const auto* f = match(rec, plan::FaultKind::Delay)) {
    std::this_thread::sleep_for(std::chrono::duration<double>(f->delaySeconds));
  }
  if (match(rec, plan::FaultKind::Corrupt)) {
    payload = payload.clone();
    auto* bytes = static_cast<unsigned char*>(payload.data_ptr());
    bytes[0] ^= 0x5a;  // after the checksum: the receiver's checksum differs
  }
  if (match(rec, plan::FaultKind::Shape) && payload.dim() >= 2 && payload.size(1) > 1) {
    // After the sender's record: it shows the planned shape, the receiver the one on the wire.
    payload = payload.narrow(1, 0, payload.size(1) - 1).contiguous();
  }
  return match(rec, plan::FaultKind::Drop) != nullptr;
}

void FaultInjector::atCompute(int iteration, int microbatch, bool backward) const {
  for (const auto& f : faults_) {
    if (f.kind == plan::FaultKind::Kill && f.iteration == iteration && f.microbatch == microbatch &&
        backward == (f.direction == events::Direction::Gradient)) {
      std::fprintf(stderr,
                   "stagescope: fault injection kills rank %d (iteration %d, microbatch %d)\n",
                   rank_, iteration, microbatch);
      std::fflush(stderr);
      ::kill(::getpid(), SIGKILL);
    }
  }
}

}  // namespace stagescope::engine
