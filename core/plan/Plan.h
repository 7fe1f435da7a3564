// The per-rank 1F1B action lists (reference §5.3), computed before any rank starts.  The
// engine executes exactly this list; the recorder stores it so that viewers and `check` can
// lay what happened over what should have happened.  Torch-free.
//
// No-op communications are omitted, as in reference §10.13: there is no RF/SB at the first
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
struct Message {
  events::Side side = events::Side::Send;
  events::Direction direction = events::Direction::Activation;
  int peer = -1;  // global rank
  int microbatch = -1;
  std::string edge;  // "llm:pp0->pp1" (P2P) or "vision->llm" (bridge)
  events::EdgeKind edgeKind = events::EdgeKind::P2P;
  events::BridgeRole role = events::BridgeRole::None;
};

struct Action {
  events::ActionKind kind = events::ActionKind::Forward;
  int microbatch = -1;      // F/B: the microbatch; comm: the activation's (or gradient's) mb
  int gradMicrobatch = -1;  // combined ops: the microbatch of the gradient half
  std::string module;
  int stage = -1;                 // pp index within the module
  std::vector<Message> messages;  // in the order they must be posted
};

struct RankPlan {
  int rank = -1;
  std::string module;
  int tp = 0, cp = 0, pp = 0, dp = 0;
  int globalStage = 0;
  int warmup = 0, steady = 0, cooldown = 0;
  std::vector<Action> actions;  // one iteration, ending with DP_REDUCE and OPT_STEP (training)
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

// Static check that the plan cannot deadlock: simulates all ranks, where a communication
// action completes only when every peer has reached its matching action.  Returns "" when
// the plan runs to completion, otherwise a one-paragraph diagnosis naming the blocked ranks,
// the action each waits in and the peer it waits on.
std::string checkPlanProgress(const Plan& plan);

// The ActionRecord (iteration, seq, kind, mb, module, stage, distinct peers) of one planned
// action, without times: what the recorder stores as the plan and the executor fills in.
events::ActionRecord toRecord(const RankPlan& rankPlan, size_t index, int iteration);
// ActionRecords (iteration, seq, kind, mb, module, stage, peers) for the recorder.
std::vector<events::ActionRecord> toRecords(const RankPlan& rankPlan, int iteration);

// Short label of an action as in reference §10.13: "F3", "B0", "RF", "SF_RB", "DP_REDUCE".
std::string actionLabel(const Action& action);
// A rank's actions as space-separated labels, e.g. "F0 SF F1 SF ... DP_REDUCE OPT_STEP".
std::string orderString(const RankPlan& rankPlan);

// Human-readable rendering for `stagescope plan`: a steps x ranks grid plus per-rank counts.
std::string renderPlan(const Plan& plan, const RunConfig& config);

}  // namespace stagescope::plan
