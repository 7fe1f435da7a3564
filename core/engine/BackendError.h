// What a c10d backend said when an operation failed, as one readable line: the reason a wait
// gave up, stored in the run file (diagnoses, waits) and shown by check, the banner and the
// inspector.
#pragma once

#include <exception>
#include <string>

namespace stagescope::engine {

// `e`'s message without what only a PyTorch developer reads: the C++ backtrace a c10::Error
// carries ("Exception raised from wait at .../Work.cpp:93 ... frame #0: ..."), the source
// location Gloo puts first ("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:547] "),
// and every line after the first; at most 200 bytes.
// E.g. "Connection closed by peer [127.0.0.1]:915", "Operation timed out!".
std::string backendReason(const std::exception& e);
// The same for a message already taken from its exception (e.what()): its first line, without
// Gloo's source location (a c10::Error's backtrace starts on its second line).
std::string backendReason(const std::string& what);

}  // namespace stagescope::engine
