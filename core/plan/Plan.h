// The per-rank 1F1B action lists (schedule.md §5.3), computed before any rank starts.  The
// engine executes exactly this list: the executor runs its actions in order and the
// Communicator posts exactly the messages of each communication action (peer, group, order,
// tag, split) and runs exactly its boundary broadcasts; the topology is consulted here, once.
// The recorder stores the plan so that viewers and `check` can lay what happened over what
// should have happened, and checkPlanProgress() proves the messages that actually run make
// progress.  Torch-free.
//
// No-op communications are omitted, as in schedule.md §10.13: there is no RF/SB at the first
// stage of a source module and no SF/RB at the last stage of the sink module; a combined op
// whose one half is a no-op degenerates to the other half (SF_RB -> SF, etc.) or vanishes.
#pragma once

#include <string>
#include <vector>

#include "core/events/Events.h"
#include "core/plan/Config.h"
#include "core/plan/Topology.h"

namespace stagescope::plan {

// One message a communication action exchanges with one peer (leaders only for bridges).
// It travels in the c10d group `group` under the tag messageTag(iteration, message).
struct Message {
  events::Side side = events::Side::Send;
  events::Direction direction = events::Direction::Activation;
  int peer = -1;  // global rank
  int microbatch = -1;
  std::string edge;  // "llm:pp0->pp1" (P2P) or "vision->llm" (bridge)
  events::EdgeKind edgeKind = events::EdgeKind::P2P;
  events::BridgeRole role = events::BridgeRole::None;
  // The module at the other end of the edge (this module for P2P): the key of the tensor in
  // the executor's maps (received activations are keyed by it; input gradients too).
  std::string peerModule;
  // A send carries part `part` of `parts` of its tensor split along the batch axis
  // (tensor_split: the first N mod parts one element larger); a receive is part `part` of
  // what its receiver concatenates, in that order.
  int part = 0, parts = 1;
  std::vector<int> group;  // ascending global ranks: the module's pp group or the bridge leaders
  std::string groupName;   // "llm/pp", "bridge:vision->llm"
  // The tensor the message carries, known from the config (messageShape): [sequence, batch,
  // hidden] with the batch of the sender's part, in the run's dtype ("float32" | "bfloat16").
  // The receiver allocates from it; the frame header's shape only verifies it.
  std::vector<int64_t> shape;
  std::string dtype;
};

// A boundary broadcast of a bridge (schedule.md §4.5), run after the action's messages
// completed: the leader `root` concatenates what it received from `peerModule` (its messages
// with that peerModule and direction, in order) and broadcasts it to every rank of `ranks`,
// which all hold this broadcast in their matching action.
struct Broadcast {
  events::Direction direction = events::Direction::Activation;
  int microbatch = -1;
  std::string peerModule;
  int root = -1;           // global rank of the leader
  std::vector<int> ranks;  // the boundary list (TP ranks of one replica's boundary stage)
  std::string groupName;   // "boundary:vision->llm"
  // What the root broadcasts: its received parts concatenated along the batch axis.
  std::vector<int64_t> shape;
  std::string dtype;
};

struct Action {
  events::ActionKind kind = events::ActionKind::Forward;
  int microbatch = -1;      // F/B: the microbatch; comm: the activation's (or gradient's) mb
  int gradMicrobatch = -1;  // combined ops: the microbatch of the gradient half
  std::string module;
  int stage = -1;  // pp index within the module
  // A hand-off between two stages on the same ranks (an encoder's last stage and the llm's
  // first stage, colocated): its peers are ranks of this rank's own slot, often itself.
  bool internal = false;
  std::vector<Message> messages;      // in the order they must be posted
  std::vector<Broadcast> broadcasts;  // in the order they run, after the messages
};

// The c10d tag of a message in `iteration`: it names the message (iteration, microbatch,
// edge, direction, header or payload frame), so a lost or reordered message leaves its receiver
// waiting for exactly that message instead of silently pairing it with another.
int messageTag(int iteration, const Message& message, bool payload);

// One (module, pipeline stage) a rank holds, with the rank's coordinates in that module's grid.
struct RankStage {
  std::string module;
  int tp = 0, cp = 0, pp = 0, dp = 0;
};

// One rank's plan.  A rank holding several stages (colocated modules, Colocation.h) runs them
// in ONE 1F1B order at its slot's position: per microbatch the forwards of its stages in
// `stages` order (encoders, then the llm stage consuming them), the backwards in reverse;
// the communication with other positions follows the 1F1B template (one action per stage
// and kind, in `stages` order), the hand-offs between its own stages sit between their
// computations (RF/SF before/after a forward, RB/SB around a backward).  Every action names
// its module and stage.
struct RankPlan {
  int rank = -1;
  std::vector<RankStage> stages;  // forward order: encoders (config order), then the llm
  int globalStage = 0;            // position of the rank's slot in the combined pipeline
  int warmup = 0, steady = 0, cooldown = 0;
  std::vector<Action> actions;  // one iteration, ending with DP_REDUCE and OPT_STEP (training)
  const RankStage* stage(const std::string& module) const;  // nullptr when not held
  std::string modules() const;                              // "vision+audio", for messages
};

struct Plan {
  int worldSize = 0;
  int totalStages = 0;
  int microbatches = 0;
  bool forwardOnly = false;
  std::vector<RankPlan> ranks;  // index = global rank
  // Expected bubble fraction of wall time: (p-1)/(m+p-1), p = totalStages.
  double expectedBubble() const;
};

Plan makePlan(const RunConfig& config, const Topology& topology);

// The activation a stage of `module` exchanges, and its gradient: [sequence, batch, hidden].
// Sequence: an encoder's patches; the llm's text_len plus every encoder's patches.  Batch: the
// module's micro-batch size per DP replica (an encoder's: micro_batch_size * llm.dp / dp).  A
// bridge carries the encoder's sequence projected to the llm's hidden size.
std::vector<int64_t> stageShape(const RunConfig& config, const ModuleConfig& module);
// Batch of part `part` of `parts` of a batch of `batch` (tensor_split: the first batch mod
// parts one larger).
int64_t partOfBatch(int64_t batch, int part, int parts);

// Static check that the plan cannot deadlock: simulates all ranks, where a communication
// action completes only when every peer has reached its matching action.  Returns "" when
// the plan runs to completion, otherwise a one-paragraph diagnosis naming the blocked ranks,
// the action each waits in and the peer it waits on.
std::string checkPlanProgress(const Plan& plan);

// The same check, structured: every rank that cannot finish, the action it is blocked in and
// the first peer (and message) it waits for.
struct BlockedRank {
  int rank = -1;
  int actionSeq = -1;      // index in the rank's action list
  int waitsOn = -1;        // global rank
  bool broadcast = false;  // waits in a boundary broadcast (message then holds its direction/mb)
  Message message;         // the message (this rank's side) it waits to complete
};
struct PlanProgress {
  bool ok = true;
  std::string text;  // checkPlanProgress's text ("" when ok)
  std::vector<BlockedRank> blocked;
};
PlanProgress analyzePlanProgress(const Plan& plan);

// The ActionRecord (iteration, seq, kind, mb, module, stage, distinct peers) of one planned
// action, without times: what the recorder stores as the plan and the executor fills in.
events::ActionRecord toRecord(const RankPlan& rankPlan, size_t index, int iteration);
// ActionRecords (iteration, seq, kind, mb, module, stage, peers) for the recorder.
std::vector<events::ActionRecord> toRecords(const RankPlan& rankPlan, int iteration);

// Short label of an action as in schedule.md §10.13: "F3", "B0", "RF", "SF_RB", "DP_REDUCE".
std::string actionLabel(const Action& action);
// A rank's actions as space-separated labels, e.g. "F0 SF F1 SF ... DP_REDUCE OPT_STEP".
std::string orderString(const RankPlan& rankPlan);

// Human-readable rendering for `stagescope plan`: a steps x ranks grid plus per-rank counts.
std::string renderPlan(const Plan& plan, const RunConfig& config);

}  // namespace stagescope::plan
