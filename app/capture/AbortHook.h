// AbortHook: what a captured process records when it dies through std::terminate.
//
// Why: c10d's Gloo backend throws on its own worker threads (e.g. "Received data size doesn't
// match expected size"); nothing catches it there, so the process calls std::terminate and
// aborts.  Without a hook the shard writer's queued rows die with it (a run file of 0 rows) and
// the capture cannot say how the rank ended.  The hook hands the uncaught exception's text to
// CaptureSession::aborted (pending operations recorded as failed, `rank_failed` "aborted: ...",
// shard flushed and closed), then lets the previous terminate handler abort as before.
//
// Contract: installAbortHook() is idempotent and process-wide; it chains to whatever handler
// was installed before it.  The hook runs at most once (a second terminate on another thread
// goes straight to the previous handler).
#pragma once

#include <string>

namespace stagescope::capture {

void installAbortHook();

// The text of the exception being handled now (std::current_exception), or a sentence saying
// there is none: "std::terminate without an active exception".
std::string currentExceptionText();

}  // namespace stagescope::capture
