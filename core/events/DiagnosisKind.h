// What a `diagnoses` row is about (docs/run-file.md "diagnoses"): one enumerator per kind any
// writer records, parsed once from the row's text by the reader and compared as the enum
// everywhere else.  What a kind means for the rank that recorded it, and for the run, is decided
// in one place: core/analysis/RankFate.h.  Torch-free.
#pragma once

#include <cstdint>
#include <string_view>

namespace stagescope::events {

enum class DiagnosisKind : uint8_t {
  Other = 0,        // a kind this build does not know (a newer writer's); its text is kept
  Hang,             // the wait-for graph's verdicts (`run`, `merge`): one per waiting rank + cause
  Timeout,          // a wait of this rank ran past its timeout
  Error,            // this rank stopped on an error (any exception)
  ConfigMismatch,   // the ranks disagreed on the run at rendezvous
  Network,          // this rank's transport failed (not a peer's end)
  PeerLost,         // this rank's transport to a peer broke (a consequence of the peer's end)
  PeerDead,         // what this rank's heartbeats saw of rank `waitsOnRank` that stopped
  OpFailed,         // a captured job's operation failed (not a timeout)
  LateCompletion,   // a captured job's operation reported stuck that completed after all
  FaultInjected,    // a planted fault acted on this rank's send
  CorruptTransfer,  // a received message failed in-band verification
  // How a captured rank ended, as its own shard records it when the process leaves (one row
  // per rank; docs/capture.md "How a job ended").  A rank with neither row ended without a
  // word: killed by a signal (SIGKILL, the OOM killer, a launcher's timeout) or aborted before
  // its shard could be written.  analysis::judgeCaptureEnd turns these rows into a status.
  RankFailed,   // the job raised (type, message, where), aborted (std::terminate's text), or
                // finish() was called with a status other than "completed"
  RankEnd,      // the job left this process normally (information, never a problem by itself)
  RankExited,   // the launcher saw this rank exit non-zero
  RankKilled,   // this rank was ended by a signal it did not get from the launcher
  RankStopped,  // the launcher (or a signal it relayed) stopped this rank
  Clock,        // this rank's measured clock offset (information)
};
inline constexpr int kDiagnosisKinds = static_cast<int>(DiagnosisKind::Clock) + 1;

// The row's text: "hang", "timeout", "rank_failed", ... ("" for Other: the record keeps its own).
const char* toString(DiagnosisKind kind);
// Other (false) when `text` names no kind this build knows.
bool parseDiagnosisKind(std::string_view text, DiagnosisKind* out);

// Information, never a problem by itself: a clock estimate, a captured rank's normal end.
// Verdicts never count such a row among a run's problems.
inline bool isInformational(DiagnosisKind kind) {
  return kind == DiagnosisKind::Clock || kind == DiagnosisKind::RankEnd;
}

}  // namespace stagescope::events
