// A captured job (app/capture) judged against stagescope's plan of its layout
// (docs/capture.md "Judging a job against the plan").  The layout is the one the job declared
// in the run file (stagescope_torch.megatron.declare_layout) or a config the user gives
// (`check --plan CONFIG`); the plan is core/plan's, the one stagescope's engine executes.
//
// What is compared, per rank and iteration: the point-to-point messages the job posted — each
// one (side, direction, peer rank, microbatch), in the order the job posted it (a payload's
// shape message, Megatron's run-time shape negotiation, counts as that message and places it
// where its first frame was posted) — against the plan's communication actions in order.  A
// planned action is matched by the next messages the job posted, as a set: the order inside
// an action is free (the plan's SF_RB and a job's "send, then receive" are the same action).
// The first action whose messages differ is the rank's deviation; a rank whose job stopped (a
// hang, a kill) inside or before an action has stopped there, not deviated.  Boundary
// broadcasts and collectives are not judged here (their own rows are checked elsewhere).
//
// Where the job also declared its own view of each rank's place in the pipeline
// (RunInfo::jobSchedule, the run file's `job_schedule` rows), the ranks whose warmup or global
// stage differs from the plan's are named with the documented reason (docs/schedule.md §7.5:
// stagescope right-aligns a shorter branch; the original places it at stage 0).  Torch-free.
#pragma once

#include <string>
#include <vector>

#include "core/events/Events.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

// Where one of the plan's communication actions falls in the job's records: the action_seq
// range (the capture's per-rank operation numbers) of the messages matched to it in one
// iteration, with the plan's label ("SF_RB mb2").  What the viewer's plan overlay draws.
struct PlanSpan {
  int iteration = -1;
  int64_t firstSeq = -1, lastSeq = -1;  // -1: none of its messages was recorded
  std::string label;
  bool matched = true;  // false: the rank deviated or stopped here
};

struct RankConformance {
  int rank = -1;
  std::string holds;  // "audio stage 0"
  int planWarmup = -1, planGlobalStage = -1;
  int64_t planned = 0, posted = 0;  // messages over the judged iterations
  int actionsMatched = 0;
  enum class State { Conforms, Stopped, Deviates } state = State::Conforms;
  int iteration = -1, action = -1;  // where it stopped or deviated (action: its n-th comm action)
  std::string sentence;             // what happened there, one or two sentences
  std::vector<PlanSpan> spans;      // every planned action the job reached, in order
};

// A rank whose own declared schedule differs from the plan, in its parts: what differs and,
// where the documentation explains it, the section and its explanation.  The parts are typed so
// that a first line (merge's verdict) takes what differs and the section by field, never by
// cutting the whole sentence at its " (§".
struct ScheduleCause {
  int rank = -1;  // the rank it is about
  // "audio stage 0 (rank 2): the job's warmup is 3 where the plan has 2; the job places it at
  // global stage 0 of 4, the plan at 1 of 4"
  std::string what;
  std::string section;  // "§7.5" (docs/schedule.md), or "" when no section explains it
  std::string why;      // that section's explanation: "the plan right-aligns a shorter ..."
  // The whole sentence: "WHAT (SECTION: WHY)", or WHAT alone when no section explains it.
  std::string line() const;
  // For a first line, the explanation left out: "WHAT (SECTION)", or WHAT alone.
  std::string brief() const;
};

struct Conformance {
  bool judged = false;
  std::string notJudged;  // why not (no layout, the layout does not fit the run, ...)
  std::string layout;     // where the layout came from: "the layout the job declared", a path
  int iterations = 0;
  std::vector<RankConformance> ranks;  // every rank of the plan
  // The cause of a deviation or hang the job's own schedule shows, with its §: one each
  // ("audio stage 0 (rank 2): the job's warmup is 3 where the plan has 2 (§7.5 …)").
  std::vector<ScheduleCause> causes;
  int64_t shapeMessages = 0;  // run-time shape messages folded into their payloads (§5.1)
  int deviating() const;
  int stopped() const;
};

// Judges `run` (a captured job) against the plan of `configText` (a stagescope config);
// `layout` names where it came from.  A config that does not parse, or whose world size
// differs from the run's, is returned not judged with the reason.
Conformance judgeAgainstPlan(const model::RunModel& run, const std::string& configText,
                             const std::string& layout);

// Conformance::causes of a captured run's declaration alone (its declared layout and job
// schedule), without its messages: what `merge` puts first in a hung job's verdict.
// Empty when nothing was declared or the declaration does not parse.
std::vector<ScheduleCause> declaredScheduleCauses(const events::RunInfo& info);

}  // namespace stagescope::analysis
