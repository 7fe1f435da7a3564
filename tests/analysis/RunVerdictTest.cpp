// The one rank-fate rule and the one run-status rule (core/analysis/RankFate.h, RunVerdict.h),
// over hand-made diagnoses: what each kind says of the rank that recorded it, which record
// decides a rank, and the status a captured job and a worker run get from them.
#include <gtest/gtest.h>

#include <string>

#include "core/analysis/RankFate.h"
#include "core/analysis/RunVerdict.h"
#include "core/events/DiagnosisKind.h"
#include "core/plan/Config.h"

namespace stagescope::analysis {
namespace {

using events::DiagnosisKind;
using events::RunStatus;

events::DiagnosisRecord record(int rank, DiagnosisKind kind, const std::string& message,
                               int64_t timeNs) {
  events::DiagnosisRecord d;
  d.rank = rank;
  d.kind = kind;
  d.message = message;
  d.timeNs = timeNs;
  return d;
}

// A one-module pipeline of `stages` stages, one per rank, running one iteration of
// `microbatches`.
plan::RunConfig pipeline(int stages, int microbatches) {
  return plan::parseConfig(
      "iterations = 1\nmicrobatches = " + std::to_string(microbatches) +
          "\n[[modules]]\nname = \"llm\"\nkind = \"llm\"\npp = " + std::to_string(stages) +
          "\nlayers = " + std::to_string(stages) + "\n",
      "run.toml");
}

TEST(DiagnosisKind, EveryKindReadsBackFromItsText) {
  for (int i = 1; i < events::kDiagnosisKinds; ++i) {
    const auto kind = static_cast<DiagnosisKind>(i);
    const std::string text = events::toString(kind);
    ASSERT_FALSE(text.empty()) << i;
    DiagnosisKind back = DiagnosisKind::Other;
    EXPECT_TRUE(events::parseDiagnosisKind(text, &back)) << text;
    EXPECT_EQ(back, kind) << text;
  }
  DiagnosisKind unknown = DiagnosisKind::Hang;
  EXPECT_FALSE(events::parseDiagnosisKind("xid_error", &unknown));
  EXPECT_EQ(unknown, DiagnosisKind::Other);
}

TEST(RankFate, EachKindSaysOneThingOfItsRank) {
  EXPECT_EQ(fateOf(DiagnosisKind::Timeout), RankFate::Hung);
  for (auto k : {DiagnosisKind::Error, DiagnosisKind::ConfigMismatch, DiagnosisKind::Network,
                 DiagnosisKind::OpFailed, DiagnosisKind::RankExited, DiagnosisKind::RankFailed})
    EXPECT_EQ(fateOf(k), RankFate::Failed) << events::toString(k);
  EXPECT_EQ(fateOf(DiagnosisKind::RankKilled), RankFate::Killed);
  EXPECT_EQ(fateOf(DiagnosisKind::RankStopped), RankFate::Stopped);
  EXPECT_EQ(fateOf(DiagnosisKind::PeerLost), RankFate::PeerLost);
  // About another rank, a fault, a verdict, information: nothing of the recording rank.
  for (auto k : {DiagnosisKind::PeerDead, DiagnosisKind::FaultInjected, DiagnosisKind::Hang,
                 DiagnosisKind::Clock, DiagnosisKind::RankEnd, DiagnosisKind::LateCompletion,
                 DiagnosisKind::CorruptTransfer, DiagnosisKind::Other})
    EXPECT_FALSE(fateOf(k).has_value()) << events::toString(k);
}

TEST(RankFate, TheStrongestRecordOfARankDecidesTheFirstOfEquals) {
  const std::vector<events::DiagnosisRecord> records = {
      record(0, DiagnosisKind::RankStopped, "stopped by the launcher", 1),
      record(0, DiagnosisKind::Timeout, "gave up waiting", 2),
      record(0, DiagnosisKind::PeerLost, "lost rank 1", 3),
      record(1, DiagnosisKind::Error, "first error", 1),
      record(1, DiagnosisKind::Network, "second error", 2),
      record(2, DiagnosisKind::Error, "an error", 1),
      record(2, DiagnosisKind::RankKilled, "killed by signal 9 (Killed)", 2),
      record(3, DiagnosisKind::PeerDead, "rank 0 is gone", 1)};
  EXPECT_EQ(decidingRecord(records, 0)->message, "gave up waiting");
  EXPECT_EQ(decidingRecord(records, 1)->message, "first error");
  EXPECT_EQ(decidingRecord(records, 2)->kind, DiagnosisKind::RankKilled);
  EXPECT_EQ(decidingRecord(records, 3), nullptr);
  EXPECT_EQ(rankSays(records[6]), "rank 2 killed by signal 9 (Killed)");
  EXPECT_EQ(rankSays(records[3]), "rank 1: first error");
}

// A captured job of two ranks; rank 0 wrote "completed" at its own exit.
model::RunModel capturedRun() {
  model::RunModel m;
  m.info.worldSize = 2;
  m.info.status = RunStatus::Completed;
  return m;
}

TEST(RunVerdict, ACapturedJobsFailedOperationBeforeAnyRankRaisedDecidesIt) {
  model::RunModel m = capturedRun();
  // A transport failure is a failed operation like any other (the worker verdict always said
  // so; the captured status used to pass it by).
  m.diagnoses = {record(1, DiagnosisKind::Network, "the connection to rank 0 broke", 10),
                 record(0, DiagnosisKind::RankFailed, "rank 0 raised RuntimeError", 20),
                 record(1, DiagnosisKind::RankFailed, "rank 1 raised RuntimeError", 30)};
  const RunVerdict v = judgeCapturedRun(m, {RunStatus::Completed, "", -1});
  EXPECT_EQ(v.status, RunStatus::Failed);
  EXPECT_EQ(v.reason, "rank 1: the connection to rank 0 broke");

  m.diagnoses[0] = record(1, DiagnosisKind::Timeout, "all_reduce timed out after 5 s", 10);
  const RunVerdict hung = judgeCapturedRun(m, {RunStatus::Completed, "", -1});
  EXPECT_EQ(hung.status, RunStatus::Hung);
  EXPECT_EQ(hung.reason, "rank 1: all_reduce timed out after 5 s");
}

TEST(RunVerdict, ACapturedRankThatRaisedFirstDecidesOverItsPeersFailedOperations) {
  model::RunModel m = capturedRun();
  m.diagnoses = {record(0, DiagnosisKind::RankFailed, "rank 0 raised ValueError: bad", 10),
                 record(1, DiagnosisKind::OpFailed, "recv from rank 0 failed", 20),
                 record(1, DiagnosisKind::RankFailed, "rank 1 raised RuntimeError", 30)};
  const RunVerdict v = judgeCapturedRun(m, {RunStatus::Completed, "", -1});
  EXPECT_EQ(v.status, RunStatus::Failed);
  EXPECT_NE(v.reason.find("ValueError"), std::string::npos) << v.reason;
}

TEST(RunVerdict, AWorkerRunNamesTheStrongestRankFirst) {
  const plan::RunConfig cfg = pipeline(3, 2);
  model::RunModel m;
  m.info.worldSize = 3;
  m.diagnoses = {record(0, DiagnosisKind::Timeout, "gave up waiting on rank 1", 30),
                 record(1, DiagnosisKind::Error, "CUDA error: out of memory", 20),
                 record(2, DiagnosisKind::RankKilled, "killed by signal 9 (Killed)", 40)};
  RunVerdict v = judgeWorkerRun(m, cfg);
  EXPECT_EQ(v.status, RunStatus::Failed);
  EXPECT_EQ(v.reason, "rank 2 killed by signal 9 (Killed)");  // a signal nobody explains first
  m.diagnoses.pop_back();
  v = judgeWorkerRun(m, cfg);
  EXPECT_EQ(v.status, RunStatus::Failed);
  EXPECT_EQ(v.reason, "rank 1: CUDA error: out of memory");  // then an error, then the waits
  m.diagnoses.pop_back();
  v = judgeWorkerRun(m, cfg);
  EXPECT_EQ(v.status, RunStatus::Hung);
  EXPECT_EQ(v.reason, "rank 0: gave up waiting on rank 1");
}

// A rank that stopped without a record is told by what its peers saw (peer_dead): the record
// whose typed signal says what ended it is preferred, however its sentence is phrased, and the
// verdict carries the signal on to the rank_killed record merge writes.
TEST(RunVerdict, ASilentRankIsToldByThePeerRecordThatKnowsItsSignal) {
  const plan::RunConfig cfg = pipeline(2, 1);
  model::RunModel m;
  m.info.worldSize = 2;
  for (int r = 0; r < 2; ++r) {
    events::RankInfo info;
    info.rank = r;
    m.ranks.push_back(info);
  }
  m.plan.resize(2);
  m.actions.resize(2);
  for (int seq = 0; seq < 2; ++seq) {
    events::ActionRecord a;
    a.rank = 1;
    a.iteration = 0;
    a.seq = seq;
    m.plan[1].push_back(a);
  }
  m.actions[1].push_back(m.plan[1].front());  // rank 1 stopped after its first action
  events::DiagnosisRecord unknown = record(0, DiagnosisKind::PeerDead, "rank 1 is gone", 10);
  unknown.waitsOnRank = 1;
  // Phrased without "killed by signal": only the field says what ended it.
  events::DiagnosisRecord known = record(0, DiagnosisKind::PeerDead, "rank 1 ended on SIGKILL", 20);
  known.waitsOnRank = 1;
  known.signal = 9;
  m.diagnoses = {record(0, DiagnosisKind::Timeout, "gave up waiting on rank 1", 30), unknown,
                 known};
  RunVerdict v = judgeWorkerRun(m, cfg);
  EXPECT_EQ(v.status, RunStatus::Failed);
  EXPECT_EQ(v.silentRank, 1);
  EXPECT_EQ(v.silentSignal, 9);
  EXPECT_EQ(v.reason.rfind("rank 1 ended on SIGKILL (seen by rank 0); its shard holds 1 of", 0), 0u)
      << v.reason;
  // A record whose sentence names a signal its field does not know is not preferred.
  m.diagnoses[1].message =
      "rank 1 stopped heartbeating, process gone: killed by signal 9 (SIGKILL)";
  v = judgeWorkerRun(m, cfg);
  EXPECT_EQ(v.silentSignal, 9);
  EXPECT_EQ(v.reason.rfind("rank 1 ended on SIGKILL (seen by rank 0)", 0), 0u) << v.reason;
}

}  // namespace
}  // namespace stagescope::analysis
