// Each transfer's edge as its rank among a run's distinct edges in text order, so that sorts
// and groupings over millions of messages compare integers, not strings, and still order edges
// by their names.
#pragma once

#include <cstdint>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::model {

// out[i] = the rank of transfers[i].edge among the distinct edges of `transfers`, by text.
std::vector<uint32_t> edgeRanks(const std::vector<events::TransferRecord>& transfers);

}  // namespace stagescope::model
