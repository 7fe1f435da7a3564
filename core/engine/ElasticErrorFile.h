// torchrun's error-file protocol: when TORCHELASTIC_ERROR_FILE is set, a failing rank writes
// why into that file as JSON, and the elastic agent prints it as the root cause of the failed
// job instead of "exitcode: 1".  Torch-free.
#pragma once

#include <string>

namespace stagescope::engine {

// Writes {"message": {"message": MESSAGE, "extraInfo": {"py_callstack": MESSAGE, "timestamp":
// "<unix seconds>"}}} to `path`, the shape torch's own error handler writes.  Creates the
// file only if it does not exist (never overwrites what another writer left there); returns
// false when it was not written.
bool writeElasticErrorFile(const std::string& path, const std::string& message);

}  // namespace stagescope::engine
