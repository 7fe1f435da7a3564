// The fault matrix: every fault kind, planted on the intra-module P2P edge (llm:pp0->pp1,
// rank 1 <-> rank 2) and on the bridge (vision->llm, rank 0 <-> rank 1) of a 3-rank run,
// through the real `stagescope run --fault ... --check`.  Each fault has one known
// diagnosis; the test asserts its exit code and the exact fragments of its text.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "storage/RunReader.h"
#include "tests/debug/DebugUtil.h"
#include "tests/engine/RunHarness.h"

namespace stagescope::testing {
namespace {

constexpr double kTimeoutSeconds = 3;  // timeout_seconds of configs/pipe3.toml

struct FaultCase {
  std::string name;
  std::string fault;  // --fault value
  int exitCode;       // of `run --check`
  std::string status;
  std::vector<std::string> fragments;  // all must appear in the output
};

void PrintTo(const FaultCase& c, std::ostream* os) {
  *os << c.name;
}

class FaultMatrix : public ::testing::TestWithParam<FaultCase> {};

TEST_P(FaultMatrix, DiagnosisNamesTheFault) {
  const FaultCase& c = GetParam();
  const auto t0 = std::chrono::steady_clock::now();
  RunOutput out =
      runStagescope(debugConfig("pipe3"), {"--fault", c.fault, "--check"}, "fault-" + c.name, 120);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(out.exitCode, c.exitCode) << out.output;
  for (const auto& f : c.fragments) {
    EXPECT_NE(out.output.find(f), std::string::npos) << "missing: " << f << "\n" << out.output;
  }
  model::RunModel run = storage::loadRun(out.runPath);
  EXPECT_EQ(events::toString(run.info.status), c.status);
  if (c.status == "hung") {
    // A planted hang ends by its timeout, not by a wait that ignores it (Gloo's own default is
    // 30 min, the store's 5 min): the bound is loose on purpose, so a loaded machine (ranks
    // starting slowly) cannot fail it while a wait that ignores timeout_seconds still does.
    EXPECT_LT(seconds, kTimeoutSeconds + 60) << out.output;
  }
  // The injector says what it did to the message (not for kill, which is not a transfer).
  if (c.fault.rfind("kill", 0) != 0) {
    bool recorded = false;
    for (const auto& d : run.diagnoses) recorded |= d.kind == events::DiagnosisKind::FaultInjected;
    EXPECT_TRUE(recorded);
  }
}

const std::string kP2P = "edge llm:pp0->pp1";
const std::string kBridge = "edge vision->llm";

INSTANTIATE_TEST_SUITE_P(
    Faults, FaultMatrix,
    ::testing::Values(
        // drop: the receiver waits for exactly the lost message; the graph names the cycle
        // and who dropped it.
        FaultCase{"drop_p2p",
                  "drop:iteration=0,microbatch=1,module=llm,stage=0,direction=activation",
                  10,
                  "hung",
                  {"stagescope: run hung",
                   "rank 2 waits for the activation of microbatch 1 from rank 1 (" + kP2P,
                   "cycle rank 1 -> rank 2 -> rank 1",
                   "rank 1 dropped the activation of microbatch 1 to rank 2 (fault injection)",
                   "FAIL  run_status          (exit 10)"}},
        FaultCase{"drop_bridge",
                  "drop:iteration=0,microbatch=1,module=vision,stage=0,direction=activation",
                  10,
                  "hung",
                  {"rank 1 waits for the activation of microbatch 1 from rank 0 (" + kBridge,
                   "cycle rank 0 -> rank 1 -> rank 0",
                   "rank 0 dropped the activation of microbatch 1 to rank 1 (fault injection)"}},
        FaultCase{"drop_p2p_gradient",
                  "drop:iteration=1,microbatch=0,module=llm,stage=1,direction=gradient",
                  10,
                  "hung",
                  {"rank 1 waits for the gradient of microbatch 0 from rank 2 (" + kP2P,
                   "rank 2 dropped the gradient of microbatch 0 to rank 1 (fault injection)"}},
        // corrupt: bits flipped after the sender's checksum.  The receiver verifies the
        // checksum in the frame before using the payload: the run stops at once (exit 9,
        // status failed), and check still names the mismatch from both sides' records.
        FaultCase{
            "corrupt_p2p",
            "corrupt:iteration=0,microbatch=1,module=llm,stage=0,direction=activation",
            9,
            "failed",
            {"stagescope: run failed: rank 2 stopped the run: corrupted transfer: rank 2 received "
             "the activation of microbatch 1 from rank 1 on edge llm:pp0->pp1 (iteration 0, "
             "action 3 SB_RF): sender rank 1 checksum ",
             "corrupt_transfer on rank 2 iteration 0",
             "checksum mismatch on " + kP2P +
                 " activation iteration 0 microbatch 1 rank 1 -> rank 2: sender rank 1 recorded",
             "FAIL  checksum_mismatch   (exit 15)"}},
        FaultCase{"corrupt_bridge_gradient",
                  "corrupt:iteration=1,microbatch=2,module=llm,stage=0,direction=gradient",
                  9,
                  "failed",
                  {"rank 0 stopped the run: corrupted transfer: rank 0 received the gradient of "
                   "microbatch 2 from rank 1 on edge vision->llm (iteration 1,",
                   "checksum mismatch on " + kBridge +
                       " gradient iteration 1 microbatch 2 rank 1 -> rank 0: sender rank 1 "
                       "recorded"}},
        // shape: one batch row less on the wire than the sender recorded (and checksummed);
        // the receiver's verification stops the run before the model sees it, and check
        // still names the shape mismatch.
        FaultCase{"shape_p2p",
                  "shape:iteration=0,microbatch=1,module=llm,stage=0,direction=activation",
                  9,
                  "failed",
                  {"corrupted transfer: rank 2 received the activation of microbatch 1 from rank 1 "
                   "on edge llm:pp0->pp1",
                   "of 768 bytes [12, 1, 16]; the sender's frame says [12, 1, 16] float32, "
                   "the plan [12, 2, 16] float32",
                   "shape mismatch on " + kP2P +
                       " activation iteration 0 microbatch 1 rank 1 -> rank 2: sent [12, 2, 16] "
                       "float32, received [12, 1, 16] float32",
                   "FAIL  shape_mismatch      (exit 14)"}},
        FaultCase{"shape_bridge",
                  "shape:iteration=0,microbatch=1,module=vision,direction=activation",
                  9,
                  "failed",
                  {"corrupted transfer: rank 1 received the activation of microbatch 1 from rank 0 "
                   "on edge vision->llm",
                   "shape mismatch on " + kBridge +
                       " activation iteration 0 microbatch 1 rank 0 -> rank 1: sent [4, 2, 16] "
                       "float32, received [4, 1, 16] float32",
                   "FAIL  shape_mismatch      (exit 14)"}},
        // nan / inf: poisoned before the sender's checksum; the FIRST occurrence is named.
        FaultCase{"nan_p2p",
                  "nan:iteration=0,microbatch=1,module=llm,stage=0,direction=activation",
                  16,
                  "completed",
                  {"first NaN/Inf in causal order: 1 NaN / 0 Inf in transfer " + kP2P +
                   " activation iteration 0 microbatch 1 rank 1 -> rank 2 at the send on rank 1 "
                   "(action #5 SF_RB)"}},
        FaultCase{"nan_bridge",
                  "nan:iteration=0,microbatch=2,module=vision,direction=activation",
                  16,
                  "completed",
                  {"first NaN/Inf in causal order: 1 NaN / 0 Inf in transfer " + kBridge +
                   " activation iteration 0 microbatch 2 rank 0 -> rank 1 at the send on rank 0"}},
        FaultCase{"inf_p2p",
                  "inf:iteration=1,microbatch=3,module=llm,stage=1,direction=gradient",
                  16,
                  "completed",
                  {"first NaN/Inf in causal order: 0 NaN / 1 Inf in transfer " + kP2P +
                   " gradient iteration 1 microbatch 3 rank 2 -> rank 1 at the send on rank 2"}},
        FaultCase{"inf_bridge",
                  "inf:iteration=0,microbatch=2,module=vision,direction=activation",
                  16,
                  "completed",
                  {"first NaN/Inf in causal order: 0 NaN / 1 Inf in transfer " + kBridge +
                   " activation iteration 0 microbatch 2 rank 0 -> rank 1 at the send on rank 0"}},
        // delay: completes, every check passes.
        FaultCase{"delay_p2p",
                  "delay:iteration=0,microbatch=1,module=llm,stage=0,delay=1",
                  0,
                  "completed",
                  {"stagescope: run completed", "result: all checks passed (exit 0)"}},
        FaultCase{"delay_bridge",
                  "delay:iteration=1,microbatch=0,module=vision,delay=1",
                  0,
                  "completed",
                  {"stagescope: run completed", "result: all checks passed (exit 0)"}},
        // kill: the rank SIGKILLs itself at the matching compute action.
        FaultCase{"kill_p2p",
                  "kill:iteration=0,microbatch=1,module=llm,stage=1",
                  10,
                  "failed",
                  {"stagescope: run failed: rank 2 was killed by signal 9 (Killed)",
                   "status failed (rank 2 was killed by signal 9"}},
        FaultCase{"kill_bridge",
                  "kill:iteration=1,microbatch=0,rank=0,direction=gradient",
                  10,
                  "failed",
                  {"stagescope: run failed: rank 0 was killed by signal 9 (Killed)"}}),
    [](const ::testing::TestParamInfo<FaultCase>& info) { return info.param.name; });

// A timeout too short for the rendezvous (1 ms): every line says what happened in words, with
// no PyTorch log line or backtrace (the launcher's own store failed before any rank started,
// with c10's "Exception raised from ... frame #0"), and no rank is said to wait on "rank -1"
// (a rank that timed out before its first action waited on no rank).
TEST(FaultHang, ATimeoutTooShortForTheRendezvousIsSaidInWords) {
  RunOutput out =
      runStagescope(debugConfig("pipe3"), {"--set", "timeout_seconds=0.001"}, "tiny-timeout", 120);
  EXPECT_EQ(out.exitCode, 10) << out.output;
  for (const char* noise : {"Exception raised from", "frame #", "[c10d]", "rank -1", "action -1"})
    EXPECT_EQ(out.output.find(noise), std::string::npos) << noise << " in:\n" << out.output;
  // Which wait runs out first within the 0.001 s budget is a race the test must not depend on:
  // the rendezvous, right after it the clock alignment, a process group's set-up, or (all
  // ranks past them) the first message of the schedule, which the receiver gives up on
  // although its sender sent it -- or a rank still starting up under load is waited on and
  // the others give up on it (a missing partner that completed nothing).  Each must be named
  // in words in the status, and the terminal must say to raise the timeout or which wait ran
  // out.
  auto namesTheCause = [](const std::string& text) {
    for (const char* words : {"rendezvous: ", "clock alignment (", "process group of ranks",
                              "the timeout is shorter than the message took",
                              "is the missing partner: it waits on nobody (nothing completed)"})
      if (text.find(words) != std::string::npos) return true;
    return false;
  };
  auto saysWhatToDo = [](const std::string& text) {
    for (const char* words :
         {"rendezvous: ", "clock alignment (", "process group of ranks", "raise the timeout"})
      if (text.find(words) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(saysWhatToDo(out.output)) << out.output;
  model::RunModel run = storage::loadRun(out.runPath);
  EXPECT_EQ(run.info.status, events::RunStatus::Hung);
  EXPECT_TRUE(namesTheCause(run.info.statusReason)) << run.info.statusReason;
  EXPECT_NE(run.info.statusReason.rfind(";", 0), 0u) << run.info.statusReason;  // no empty lead
}

// The wait-for graph is in the run file, as "hang" diagnoses that check and the GUI read.
TEST(FaultHang, WaitForGraphIsRecorded) {
  RunOutput out = runStagescope(debugConfig("pipe3"),
                                {"--fault", "drop:iteration=0,microbatch=1,module=llm,stage=0"},
                                "hang-graph", 120);
  EXPECT_EQ(out.exitCode, 10) << out.output;
  model::RunModel run = storage::loadRun(out.runPath);
  EXPECT_EQ(run.info.status, events::RunStatus::Hung);
  // The status is one first line: the root cause and how many more verdicts the graph holds
  // (the cycle it led to is among the "hang" diagnoses below).
  EXPECT_NE(run.info.statusReason.find("more in the wait-for graph"), std::string::npos)
      << run.info.statusReason;
  EXPECT_LE(run.info.statusReason.size(), 200u) << run.info.statusReason;
  // The root cause leads the status (and so the `run hung:` line, check and the banner): the
  // dropped message, not whichever rank timed out first nor the cycle it led to.
  EXPECT_EQ(run.info.statusReason.rfind("rank 1 dropped the activation of microbatch 1 to rank 2 "
                                        "(fault injection)",
                                        0),
            0u)
      << run.info.statusReason;
  EXPECT_NE(out.output.find("stagescope: run hung: rank 1 dropped the activation"),
            std::string::npos)
      << out.output;
  // Explained once: the dropped send is not also reported as a send rank 1 "has not posted".
  EXPECT_EQ(run.info.statusReason.find("has not posted the send of the activation of microbatch 1 "
                                       "to rank 2"),
            std::string::npos)
      << run.info.statusReason;
  bool rank2WaitsOn1 = false, cycle = false;
  for (const auto& d : run.diagnoses) {
    if (d.kind != events::DiagnosisKind::Hang) continue;
    if (d.rank == 2 && d.waitsOnRank == 1 && d.iteration == 0 &&
        d.message.rfind("rank 2 waits for the activation of microbatch 1 from rank 1", 0) == 0) {
      rank2WaitsOn1 = true;
    }
    cycle |= d.message.find("cycle rank 1 -> rank 2 -> rank 1") != std::string::npos;
  }
  EXPECT_TRUE(rank2WaitsOn1);
  EXPECT_TRUE(cycle);
  // And what to change, after the verdict, on the terminal and in the file.
  EXPECT_NE(out.output.find("stagescope: to change: nothing in the schedule; the planted drop "
                            "fault is the cause"),
            std::string::npos)
      << out.output;
  // The same wait as data (the `waits` table), which the graph above is built from.
  bool rank2Row = false;
  for (const auto& w : run.waits) {
    if (w.rank != 2) continue;
    rank2Row = true;
    EXPECT_EQ(w.peer, 1);
    EXPECT_EQ(w.op, events::WaitOp::Recv);
    EXPECT_EQ(w.direction, events::Direction::Activation);
    EXPECT_EQ(w.iteration, 0);
    EXPECT_EQ(w.microbatch, 1);
    EXPECT_FALSE(w.edge.empty());
    EXPECT_GE(w.actionSeq, 0);
    EXPECT_GT(w.timeoutSeconds, 0.0);
  }
  EXPECT_TRUE(rank2Row) << run.waits.size() << " wait rows";
  // Why each wait gave up, as a user reads it: the backend's reason, never its C++ backtrace
  // ("Exception raised from wait at .../Work.cpp:93 ... frame #0: c10::Error::Error...") nor
  // Gloo's source location ("[/pytorch/third_party/gloo/.../pair.cc:547] ").
  for (const auto& d : run.diagnoses) {
    if (d.kind != events::DiagnosisKind::Timeout) continue;
    EXPECT_EQ(d.message.find("Exception raised from"), std::string::npos) << d.message;
    EXPECT_EQ(d.message.find("frame #"), std::string::npos) << d.message;
    EXPECT_EQ(d.message.find(": [/"), std::string::npos) << d.message;
  }
  for (const auto& w : run.waits) EXPECT_EQ(w.error.find("[/"), std::string::npos) << w.error;
  // `check` on the saved file names the same graph, with the run_status exit code.
  CliResult check = runCli({"check", out.runPath});
  EXPECT_EQ(check.exitCode, 10) << check.output;
  EXPECT_NE(check.output.find("hang on rank 2 iteration 0"), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("waits on rank 1: rank 2 waits for the activation of microbatch 1"),
            std::string::npos)
      << check.output;
}

// The receiver knows each message's shape from the plan: a payload of another shape stops it
// even where no checksum travels (level off), naming what the frame said and what the plan
// says, with the corrupt-transfer exit code and status failed.
TEST(FaultShape, ThePlanCatchesAWrongShapeWithoutChecksums) {
  RunOutput out =
      runStagescope(debugConfig("pipe3"),
                    {"--set", "record.level=off", "--fault",
                     "shape:iteration=0,microbatch=1,module=llm,stage=0,direction=activation"},
                    "shape-level-off", 120);
  EXPECT_EQ(out.exitCode, 9) << out.output;
  EXPECT_NE(out.output.find("corrupted transfer: rank 2 received the activation of microbatch 1 "
                            "from rank 1 on edge llm:pp0->pp1 (iteration 0, action 3 SB_RF): "
                            "the sender's frame says [12, 1, 16] float32, the plan [12, 2, 16] "
                            "float32"),
            std::string::npos)
      << out.output;
  EXPECT_EQ(storage::loadRun(out.runPath).info.status, events::RunStatus::Failed);
}

// A planted delay longer than the timeout hangs the run: the verdict names the delay (recorded
// before the rank sleeps, so a rank stopped in it has said why), in one first line, and ends
// with what to change.  Before, it named a "missing partner" that "waits on nobody" and never
// mentioned the fault.
TEST(FaultDelay, ADelayLongerThanTheTimeoutIsTheNamedCause) {
  RunOutput out = runStagescope(
      debugConfig("pipe3"),
      {"--set", "timeout_seconds=2", "--fault",
       "delay:iteration=0,microbatch=1,module=llm,stage=0,direction=activation,delay=8"},
      "delay-hang", 120);
  EXPECT_EQ(out.exitCode, 10) << out.output;
  const auto line = out.output.find("stagescope: run hung: ");
  ASSERT_NE(line, std::string::npos) << out.output;
  const std::string first = out.output.substr(line, out.output.find('\n', line) - line);
  EXPECT_LE(first.size(), 220u) << first;
  EXPECT_NE(first.find("was held by a planted delay 8 s before sending the activation of "
                       "microbatch 1"),
            std::string::npos)
      << first;
  EXPECT_NE(out.output.find("stagescope: to change: raise the timeout above the planted delay "
                            "(the waits gave up after 2 s)"),
            std::string::npos)
      << out.output;
}

// A delayed transfer completes and its recorded time is at least the delay.
TEST(FaultDelay, RecordedTimeCoversTheDelay) {
  RunOutput out = runStagescope(
      debugConfig("pipe3"),
      {"--fault",
       "delay:iteration=0,microbatch=2,module=llm,stage=0,direction=activation,delay=1.5"},
      "delay-time", 120);
  ASSERT_EQ(out.exitCode, 0) << out.output;
  model::RunModel run = storage::loadRun(out.runPath);
  int found = 0;
  for (const auto& t : run.transfers) {
    if (t.iteration != 0 || t.microbatch != 2 || t.edge != "llm:pp0->pp1" ||
        t.direction != events::Direction::Activation) {
      continue;
    }
    ++found;
    // The sender's record starts before the delay; the receiver waited for it as well.
    if (t.side == events::Side::Send) {
      EXPECT_GE(t.endNs - t.startNs, 1500000000LL);
    }
  }
  EXPECT_EQ(found, 2);
}

// Without --check, `run` exits with the run_status code for a failed run; with --check the
// check's own code (verified across the matrix above).
TEST(FaultKill, RunWithoutCheckExitsWithRunStatus) {
  RunOutput out =
      runStagescope(debugConfig("pipe3"), {"--fault", "kill:iteration=0,microbatch=0,rank=1"},
                    "kill-nocheck", 120);
  EXPECT_EQ(out.exitCode, 10) << out.output;
  EXPECT_NE(out.output.find("rank 1 was killed by signal 9"), std::string::npos) << out.output;
  // How each process ended is data in the run file: the viewer marks rank 1 killed from it.
  model::RunModel run = storage::loadRun(out.runPath);
  bool killed = false;
  for (const auto& d : run.diagnoses)
    killed |= d.rank == 1 && d.kind == events::DiagnosisKind::RankKilled;
  EXPECT_TRUE(killed);
}

// Malformed --fault values: exit 2 with one clear line naming the flag and the problem.
TEST(FaultFlag, MalformedValuesAreRejected) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"explode:iteration=0", "unknown kind 'explode'"},
      {"drop:iteration=x,module=llm",
       "iteration = 'x': not an integer; expected an integer in 0.."},
      {"drop:iteration=0,module=llm,colour=red", "unknown key 'colour'"},
      {"drop:iteration=0", "module=NAME is required"},
      {"delay:iteration=0,module=llm", "a delay fault needs delay=SECONDS"},
      {"drop:iteration=0,module=llm,iteration=1", "'iteration' given twice"},
      {"drop:iteration=0,microbatch,module=llm", "'microbatch': expected key=value"},
      // Numbers are checked against the config's ranges, and named with them.
      {"drop:iteration=7,module=llm", "iteration = 7: expected an integer in 0.."},
      {"drop:iteration=2147483647,module=llm",
       "iteration = 2147483647: expected an integer in 0.."},
      // Validated with the config like a [[faults]] table: names the field and the value.
      {"drop:iteration=0,module=audio", "\"audio\""},
      {"drop:iteration=0,module=llm,stage=5", "stage = 5: expected an integer in -1.."},
      {"drop:iteration=0,module=llm,direction=sideways", "faults[0].direction"},
  };
  for (const auto& [spec, fragment] : cases) {
    CliResult r =
        runCli({"run", debugConfig("pipe3"), "--fault", spec, "-o", tempRunPath("flag-rejected")});
    EXPECT_EQ(r.exitCode, 2) << spec << "\n" << r.output;
    EXPECT_EQ(lines(r.output).size(), 1u) << spec << "\n" << r.output;
    EXPECT_NE(r.output.find(fragment), std::string::npos) << spec << "\n" << r.output;
  }
}

}  // namespace
}  // namespace stagescope::testing
