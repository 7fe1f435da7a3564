// The transfers one action recorded, found by binary search in the run's transfers (sorted by
// iteration and microbatch): the inspector lists them, the grid map draws their peers.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::ui {

// Transfers recorded by one action (indices into RunModel::transfers); none when `rank` or
// `action` is out of range.
std::vector<int64_t> transfersOfAction(const model::RunModel& model, int rank, int64_t action);

}  // namespace stagescope::ui
