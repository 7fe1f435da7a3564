// Coverage: what a run recorded against what it planned to record.  No comparison or check may
// call anything EQUAL/IDENTICAL/PASS unless the data it judged is complete.
//
// Expected records come from the plan (run.plan), restricted by the run's record filter
// (record.ranks / record.modules / record.iterations): a filtered-out rank or iteration is
// "skipped", not "missing".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/RecordFilter.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

// Messages one planned action implies: a one-direction action (SF, RF, SB, RB) one per entry of
// its peers (a peer is listed once per message); a combined one (SF_RB, SB_RF) one per distinct
// peer in each of its two directions.
struct PlannedMessages {
  int64_t activationSends = 0, activationRecvs = 0, gradientSends = 0, gradientRecvs = 0;
  int64_t total() const {
    return activationSends + activationRecvs + gradientSends + gradientRecvs;
  }
};
PlannedMessages messagesOf(const events::ActionRecord& planned);

struct RunCoverage {
  bool completed = false;  // status completed and the file is not partial
  std::string status;      // the recorded status (and "partial file" when partial)
  int iterationsPlanned = 0, iterationsRecorded = 0;   // recorded: every expected rank finished it
  int64_t actionsExpected = 0, actionsRecorded = 0;    // within the filter
  int64_t messagesExpected = 0, messagesRecorded = 0;  // message sides, within the filter
  int64_t skippedByFilter = 0;  // planned actions the filter excluded from recording
  RecordFilter filter;
  std::vector<std::string> missing;  // one line per gap ("rank 5 stopped after action 12 of 40
                                     // in iteration 1"), at most a few per rank
  bool complete() const {
    return completed && actionsRecorded >= actionsExpected &&
           messagesRecorded >= messagesExpected && iterationsRecorded >= iterationsPlanned;
  }
  std::string summary() const;  // one sentence
};

// Coverage of one run.  A plan stored once (one iteration) stands for every iteration.
RunCoverage coverageOf(const model::RunModel& run, const RecordFilter& filter = {});

}  // namespace stagescope::analysis
