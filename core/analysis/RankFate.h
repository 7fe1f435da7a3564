// What a diagnosis says about the rank that recorded it, and about the run: the one rule that the
// viewer (each rank's fate), `merge` (a worker run's verdict) and a captured job's status all
// call, so a kind never means one thing to one of them and another to the next.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::analysis {

enum class RankFate : uint8_t {
  Completed,   // every planned action completed
  Unfinished,  // the run is still running, or ended without saying why this rank stopped
  Hung,        // timed out waiting for a peer
  Failed,      // an error, or a non-zero exit
  Killed,      // ended by a signal it did not get from the launcher
  Stopped,     // stopped by the launcher after another rank failed, or interrupted
  PeerLost,    // its transport to a peer broke (a consequence of another rank's end)
};
const char* toString(RankFate fate);  // "completed", "hung", "peer lost", ...

// The fate a diagnosis gives the rank that recorded it (`DiagnosisRecord::rank`), or none: a
// kind about another rank (peer_dead), a fault, a verdict, information.
//   timeout                                                   -> Hung
//   error, config_mismatch, network, op_failed, rank_exited,
//   rank_failed                                               -> Failed
//   rank_killed -> Killed,  rank_stopped -> Stopped,  peer_lost -> PeerLost
std::optional<RankFate> fateOf(events::DiagnosisKind kind);

// How strongly a fate explains a rank's end, the root cause strongest: Killed 4 (a signal nobody
// explains), Failed 3, Hung 2, PeerLost 1, Stopped 0 (a consequence of another rank's end).
// Completed and Unfinished say nothing: -1.  Of a rank's records the strongest decides, the
// first of equals.
// The record of rank `rank` that decides its fate (the strongest, the first of equals), or null.
const events::DiagnosisRecord* decidingRecord(const std::vector<events::DiagnosisRecord>& records,
                                              int rank);
int strength(RankFate fate);

// True for a record of how the rank's process ended (rank_failed, rank_exited, rank_killed,
// rank_stopped: written by the launcher or at the process's exit, its message a predicate of
// "rank N": "killed by signal 9 (Killed)"); false for a record of a failed operation of the
// rank (timeout, error, op_failed, ...: its message a sentence of its own).
bool endsTheProcess(events::DiagnosisKind kind);

// "rank R: <message>" or, for a record of how the process ended, "rank R <message>".
std::string rankSays(const events::DiagnosisRecord& d);

// The run's status a failed operation gives it: Hung for a timeout, Failed for any other
// failing kind; nullopt for a record that is not a failed operation (endsTheProcess, none).
std::optional<events::RunStatus> statusOfFailedOperation(events::DiagnosisKind kind);

}  // namespace stagescope::analysis
