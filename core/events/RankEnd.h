// How a rank of a captured job ended, as its own shard records it: one `diagnoses` row per rank,
// written when the process leaves (docs/run-file.md "diagnoses").
//
//   rank_end     the job left this process normally (the interpreter exited, or finish() was
//                called with "completed"); information, never a problem by itself
//   rank_failed  the job raised (the exception's type, message and where), or the process
//                aborted (std::terminate: the exception's text), or finish() was called with
//                another status; the message says which
//
// A rank with neither row ended without a word: killed by a signal (SIGKILL, the OOM killer,
// a launcher's timeout) or aborted before its shard could be written.  The rule that turns
// these rows into a run's status is analysis::judgeCaptureEnd (core/analysis/CaptureEnd.h).
#pragma once

#include <string_view>

namespace stagescope::events {

inline constexpr std::string_view kRankEndKind = "rank_end";
inline constexpr std::string_view kRankFailedKind = "rank_failed";

}  // namespace stagescope::events
