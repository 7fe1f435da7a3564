// How a captured job ended (core/analysis/CaptureEnd.h), over hand-made diagnoses: completed only
// when every rank recorded a clean end; a rank that raised leads, causally first; a rank with no
// end at all is killed.
#include <gtest/gtest.h>

#include <string>

#include "core/analysis/CaptureEnd.h"
#include "core/events/DiagnosisKind.h"

namespace stagescope::analysis {
namespace {

using events::RunStatus;

model::RunModel runOf(int world) {
  model::RunModel m;
  m.info.worldSize = world;
  m.info.status = RunStatus::Completed;  // what rank 0 wrote at its own exit: never enough
  return m;
}

void end(model::RunModel& m, int rank, events::DiagnosisKind kind, const std::string& message,
         int64_t timeNs) {
  events::DiagnosisRecord d;
  d.rank = rank;
  d.kind = kind;
  d.message = message;
  d.timeNs = timeNs;
  m.diagnoses.push_back(d);
}

TEST(CaptureEnd, EveryRankLeftNormallyIsCompleted) {
  auto m = runOf(3);
  for (int r = 0; r < 3; ++r) end(m, r, events::DiagnosisKind::RankEnd, "left", 10 + r);
  const CaptureEnd e = judgeCaptureEnd(m);
  EXPECT_EQ(e.status, RunStatus::Completed);
  EXPECT_EQ(e.reason, "");
}

TEST(CaptureEnd, ARankWithNoEndIsKilledWhateverRankZeroSaid) {
  auto m = runOf(4);
  end(m, 0, events::DiagnosisKind::RankEnd, "left", 1);
  end(m, 2, events::DiagnosisKind::RankEnd, "left", 1);
  const CaptureEnd e = judgeCaptureEnd(m);
  EXPECT_EQ(e.status, RunStatus::Killed);
  EXPECT_EQ(e.silentRanks, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(e.reason,
            "ranks 1, 3 recorded no end (killed by a signal, or aborted before the shard was "
            "written)");
}

TEST(CaptureEnd, NoRowsAtAllIsKilledNotCompleted) {
  const CaptureEnd e = judgeCaptureEnd(runOf(2));
  EXPECT_EQ(e.status, RunStatus::Killed);
  EXPECT_EQ(e.silentRanks.size(), 2u);
}

TEST(CaptureEnd, TheCausallyFirstRaiseLeadsAndKilledPeersFollow) {
  auto m = runOf(3);
  end(m, 0, events::DiagnosisKind::RankFailed, "rank 0 raised RuntimeError: later", 500);
  end(m, 2, events::DiagnosisKind::RankFailed, "rank 2 raised ValueError: first", 100);
  // rank 1 left nothing: its launcher stopped it after rank 2 failed
  const CaptureEnd e = judgeCaptureEnd(m);
  EXPECT_EQ(e.status, RunStatus::Failed);
  EXPECT_EQ(e.failedRanks, (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(e.reason,
            "rank 2 raised ValueError: first; also failed: rank 0; rank 1 recorded no end "
            "(killed by a signal, or aborted before the shard was written)");
}

TEST(CaptureEnd, RowsOfRanksOutsideTheWorldAreIgnored) {
  auto m = runOf(1);
  end(m, 0, events::DiagnosisKind::RankEnd, "left", 1);
  end(m, 5, events::DiagnosisKind::RankFailed, "rank 5 raised", 1);
  end(m, -1, events::DiagnosisKind::RankFailed, "launcher", 1);
  EXPECT_EQ(judgeCaptureEnd(m).status, RunStatus::Completed);
}

}  // namespace
}  // namespace stagescope::analysis
