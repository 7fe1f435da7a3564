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

// The copies of the reduced gradients a run's layout implies: every DP (and CP) replica of
// every TP shard of every parameter records its own copy in every iteration its record filter
// keeps.  The shards are those any replica recorded in any iteration (module, parameter, tp,
// pp: the part a TP rank of a stage holds); the replicas the ranks of that (module, tp, pp).
// A copy that is missing
// is a record the run lost: the copies that exist may agree (Replicas.h) and still not be all.
// A captured job records what its script chose to record: nothing is expected of it.
struct CopyCoverage {
  int64_t expected = 0, recorded = 0;
  std::vector<std::string> missing;  // the first few missing copies, one line each
  int64_t missingCount() const { return expected - recorded; }
  std::string summary() const;  // "119 of 120 expected reduced-gradient copies recorded"
};
CopyCoverage reducedCopyCoverage(const model::RunModel& run, const RecordFilter& filter = {});

struct RunCoverage {
  bool completed = false;  // status completed and the file is not partial
  std::string status;      // the recorded status (and "partial file" when partial)
  int iterationsPlanned = 0, iterationsRecorded = 0;   // recorded: every expected rank finished it
  int64_t actionsExpected = 0, actionsRecorded = 0;    // within the filter
  int64_t messagesExpected = 0, messagesRecorded = 0;  // message sides, within the filter
  int64_t skippedByFilter = 0;  // planned actions the filter excluded from recording
  int64_t copiesExpected = 0, copiesRecorded = 0;  // reduced-gradient copies (CopyCoverage)
  RecordFilter filter;
  std::vector<std::string> missing;  // one line per gap ("rank 5 stopped after action 12 of 40
                                     // in iteration 1"), at most a few per rank
  bool complete() const {
    return completed && actionsRecorded >= actionsExpected &&
           messagesRecorded >= messagesExpected && iterationsRecorded >= iterationsPlanned &&
           copiesRecorded >= copiesExpected;
  }
  std::string summary() const;  // one sentence
};

// Coverage of one run.  A plan stored once (one iteration) stands for every iteration.
RunCoverage coverageOf(const model::RunModel& run, const RecordFilter& filter = {});

}  // namespace stagescope::analysis
