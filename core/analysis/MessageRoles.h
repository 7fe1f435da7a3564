// Message roles: both sides of every message agree on what it means, and it means what the
// plan of a pipeline says (docs/capture.md "Message roles").
//
// Input: the run's transfers, paired as everywhere (analysis::pairsOf), and the roles the
// capture helpers recorded for each side (events::MessageRoleRecord, keyed by the recording
// rank, iteration and action_seq of the transfer).  For every pair whose two sides both have a
// role:
//   * they carry the same thing: an activation sent is an activation received (a crossed
//     exchange — one side's gradient taken as the other's activation — fails here, even when
//     shapes and checksums agree);
//   * they point at each other: a send to the next stage is received from the previous stage;
//   * the roles are the plan's: activations go to the next stage, gradients to the previous.
// A side without a role is not judged (counted as such); nothing is inferred from sizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct RoleMismatch {
  int64_t send = -1, recv = -1;  // indices into RunModel::transfers
  std::string why;               // one line: both ranks, what each meant, the call
};

struct RoleJudgement {
  int64_t judged = 0;                    // pairs whose two sides both had a role
  int64_t withoutRole = 0;               // complete pairs where a side had none
  std::vector<RoleMismatch> mismatches;  // in transfer order of the send
};

RoleJudgement judgeMessageRoles(const model::RunModel& run);

}  // namespace stagescope::analysis
