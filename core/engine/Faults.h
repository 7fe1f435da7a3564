// Fault injection on the sending side of a transfer (debugging issue): delay, drop, corrupt
// (flip bits after the checksum was taken), shape (send one batch row less than the sender
// recorded), nan / inf
// (poison the first element before the checksum, so both sides record it), and kill (the
// rank SIGKILLs itself when it reaches the matching forward/backward).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "core/events/Events.h"
#include "core/plan/Config.h"

namespace stagescope::engine {

class FaultInjector {
 public:
  FaultInjector(std::vector<plan::FaultConfig> faults, const plan::RunConfig& config, int rank,
                const std::string& module, int stage);
  bool empty() const { return faults_.empty(); }
  // Called before a payload is described (nan/inf: the sender's record sees them).
  void beforeDigest(const events::TransferRecord& rec, at::Tensor& payload) const;
  // Called after the sender's record was filled (delay, corrupt, shape: the record does not
  // see them); returns true when the send must be dropped.
  bool beforeSend(const events::TransferRecord& rec, at::Tensor& payload) const;
  // The faults that act on this transfer, as a record (kinds empty: none).  The record's rank,
  // peer, iteration and action come from `rec`; its time is left to the caller.
  events::InjectedFaultRecord matching(const events::TransferRecord& rec) const;
  // Called at each compute action; kills the process for a matching kill fault.
  void atCompute(int iteration, int microbatch, bool backward) const;

 private:
  const plan::FaultConfig* match(const events::TransferRecord& rec, plan::FaultKind kind) const;
  std::vector<plan::FaultConfig> faults_;
  int rank_;
  std::string module_;
  int stage_;
  int lastStage_;
};

}  // namespace stagescope::engine
