// Writes a RunModel to a real run file through the storage writer: one ShardWriter per rank,
// then the merge (used for the GUI fixture and bench_gui).  ImGui-free.
#pragma once

#include <string>

#include "storage/RunModel.h"

namespace stagescope::ui {

// Throws std::runtime_error when the storage writer is not built or writing fails.
void writeRunFile(const storage::RunModel& model, const std::string& path);

}  // namespace stagescope::ui
