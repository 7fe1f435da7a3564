// What a point-to-point message means in the job's own communication call, as the capture
// helpers record it (stagescope_torch.megatron.record_roles): which call posted it, whether it
// carries an activation or a gradient, and whether the peer is the next or the previous stage.
//
// Why: a transfer row says who sent how many bytes to whom; it cannot say what the bytes were
// for.  Two ranks that exchange an activation and a gradient with the same shape in one call
// (a pipeline of two stages, where the previous and the next stage are one rank) can pair them
// crosswise on the wire and every checksum still agrees (Megatron-LM PR #5271).  Each side's
// own view of the message is what tells: analysis::judgeMessageRoles
// (core/analysis/MessageRoles.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/events/Events.h"

namespace stagescope::events {

struct MessageRoleRecord {
  int32_t rank = -1;       // the recording rank
  int32_t iteration = -1;  // of the message (its TransferRecord's)
  int32_t actionSeq = -1;  // the TransferRecord.actionSeq of the message on this rank
  Side side = Side::Send;  // this rank's side of the message
  Direction carries = Direction::Activation;  // as this side's call means it
  bool peerIsNext = false;  // the peer is the next stage (false: the previous stage)
  std::string call;  // the communicator call, e.g. "send_forward_backward_recv_forward_backward"
};

}  // namespace stagescope::events
