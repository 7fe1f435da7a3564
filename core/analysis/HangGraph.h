// The wait-for graph of a run that stopped: who waits on whom, in which planned action, and the
// verdict (a cycle, or the missing partner that never posted its side).  Built from structured
// fields only — the rank's `waits` row (RunModel::waits: action, peer, op, edge, direction,
// iteration, microbatch), or for files without one its timeout diagnosis (rank, iteration,
// action_seq, waits_on_rank) and the planned action at that position — never from text.
// `run` (the terminal line and the "hang" diagnoses it records), `check` and the viewer use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct WaitEdge {
  int rank = -1, waitsOn = -1;
  int iteration = -1, actionSeq = -1;
  std::string action;   // planned action kind ("RB", "SF", ...) or "" when not in the plan
  int microbatch = -1;  // of the awaited message (from plan order, not the action's own)
  events::Direction direction = events::Direction::Activation;
  bool sending = false;  // blocked sending rather than receiving
  // What it waits for ("the activation of microbatch 3 from rank 2", "rank 2" when the message is
  // not known), or with `toSend` what it waits to send ("the activation of microbatch 3 to rank
  // 4"): the object of waiting()'s verb, which toSend picks.
  std::string waitsFor;
  bool toSend = false;  // waitsFor is a message this rank waits to send, not one it waits for
  // What waitsFor names without the peer it is exchanged with: "the activation of microbatch 3",
  // "the boundary broadcast", "rank 2" (the message not known); a collective's is its waitsFor.
  // The verdicts that name the message apart from its sender take it ("rank 1 dropped the
  // activation of microbatch 3 to rank 2").
  std::string awaited;
  std::string lastDone;       // "last completed: iteration 1 F mb 2" / "nothing completed"
  std::string edge;           // the edge the two ranks exchange on ("" when none was recorded)
  double timeoutSeconds = 0;  // how long it waited before giving up (0: not recorded)
  // "waits for the activation of microbatch 1 from rank 1" / "waits to send the ..." (toSend)
  std::string waiting() const;
  // "rank 2 waits for the activation of microbatch 1 from rank 1 (edge E, iteration 0,
  // action 3 RF)"
  std::string sentence() const;
};

// What a verdict sentence says, most causal first: an injected fault explains the wait it
// caused; a wait that gave up on a message already sent, a timeout too short; a partner that
// does something else (or nothing) is why the others wait; a cycle is what the waits look
// like, the consequence.
// A wait that gave up on a message its partner had sent was too short, whatever the rest of the
// graph looks like (the partner then waits for something the waiter never got to).
enum class HangCause : uint8_t {
  Fault = 0,
  TimeoutTooShort = 1,
  NotPosted = 2,
  MissingPartner = 3,
  Cycle = 4
};

struct HangVerdict {
  int aboutRank = -1;
  std::string sentence;  // "cycle rank 1 -> rank 2 -> rank 1: ..." / "rank 3 is the missing
                         // partner: ..." / "rank 2 dropped ... (fault injection)"
  HangCause cause = HangCause::Cycle;
  int waiter = -1;         // NotPosted and Fault: the rank whose wait this explains
  std::vector<int> cycle;  // Cycle: its ranks in waiting order
  // Fault: what was planted ("drop", "delay", or the other kinds as the rank wrote them).
  // MissingPartner: "error" when the partner failed with one, else "".
  std::string detail;
  // Whether the sentence is about `rank`: the rank it names first, the waiter it explains, or a
  // member of its cycle (the viewer's stuck inspector shows a rank the verdicts about it).
  bool concerns(int rank) const;
};

struct WaitGraph {
  std::vector<WaitEdge> edges;        // one per waiting rank, by rank
  std::vector<HangVerdict> verdicts;  // root cause first (HangCause order), then found order
  // Each cycle of waits once, as its ranks in waiting order, starting at its lowest rank
  // ({1, 2}: rank 1 waits on rank 2, which waits on rank 1).
  std::vector<std::vector<int>> cycles;
  // Whether the edge `rank` waits on `waitsOn` closes or continues one of `cycles`.
  bool inCycle(int rank, int waitsOn) const;
  int erroredRank = -1;  // a rank that recorded an error: the cause
  std::string error;
  bool empty() const { return edges.empty(); }
  // The root cause in one sentence: the first verdict ("" when there is none).
  std::string cause() const;
  // The root cause for a first line (run's status, check, the viewer's banner): the first
  // verdict and how many more the graph holds.
  std::string headline() const;
  // What to change, from the root cause: "to change: ..." ("" when there is no verdict).
  std::string remedy() const;
  // The longest any rank waited before giving up, seconds (0 when none was recorded).
  double longestWait() const;
  std::string verdict() const;  // the verdict sentences, root cause first, joined with "; "
  std::string text() const;     // "wait-for graph:" + one line per rank + the verdicts
};

WaitGraph waitForGraph(const model::RunModel& run);

// Whether the wait of `rank` at (iteration, actionSeq) ended after all: a captured job's hang
// watchdog reports an operation stuck while it still runs, and writes a `late_completion`
// diagnosis if it completes later.  Such a wait is not a hang (waitForGraph skips it; the
// run's status ignores its timeout diagnosis).
bool completedLate(const model::RunModel& run, int rank, int iteration, int actionSeq);

}  // namespace stagescope::analysis
