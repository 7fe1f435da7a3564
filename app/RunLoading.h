// Loading run files for the headless commands (check, compare, export): with a progress
// indicator, two runs on two threads, and read models kept until the process exits.
#pragma once

#include <string>
#include <utility>

#include "core/model/LiveState.h"
#include "storage/RunFileError.h"
#include "storage/RunReader.h"

namespace stagescope::app {

// Both loaders observe whether a run is live around the read (storage/RunLiveness.h) and put its
// live state (not live when nobody writes it) into `live` when given.
//
// loadRun with a progress bar on a terminal (plain lines otherwise), shown only when loading
// takes longer than half a second: small files and errors stay one line.
model::RunModel loadWithProgress(const std::string& path, storage::LoadOptions opts,
                                 model::LiveState* live = nullptr);

// Loads `a` on this thread and `b` on a second one at the same time (each has its own SQLite
// connection and model; nothing is shared but the progress indicator, which shows both).
// Throws what loading `a` threw, else what loading `b` threw: the error a serial load of a then
// b would report first.
std::pair<model::RunModel, model::RunModel> loadTwoWithProgress(const std::string& a,
                                                                const std::string& b,
                                                                storage::LoadOptions opts);
// The same with options of its own for each run.
std::pair<model::RunModel, model::RunModel> loadTwoWithProgress(const std::string& a,
                                                                const std::string& b,
                                                                storage::LoadOptions optsA,
                                                                storage::LoadOptions optsB,
                                                                model::LiveState* liveA = nullptr,
                                                                model::LiveState* liveB = nullptr);

// Keeps `model` until the process exits instead of freeing it.  A command that ends right after
// its report would otherwise spend seconds of CPU freeing a 10^7-event read model string by
// string (7 % of a 10^7 compare, by perf) for memory the exit returns at once.  The models stay
// reachable (a sanitizer's leak check does not count them).
void keepUntilExit(model::RunModel&& model);

}  // namespace stagescope::app
