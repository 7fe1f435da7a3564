// Small formatting helpers shared by verdict messages and the writers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::analysis {

// Small helpers shared by verdict messages and the writers.
std::string formatChecksum(uint64_t checksum);  // 16 hex digits
std::string formatShape(const std::vector<int64_t>& shape);
// A recorded value with `digits` significant digits; NaN and infinities by name ("NaN", "+Inf",
// "-Inf"), never as a number and never as the "-" that means "not recorded".
std::string formatValue(double v, int digits = 6);
// "[timeout] rank 2, iteration 0, action #5, waits on rank 3": only the coordinates that apply
// (-1 in the file means none and is never shown).
std::string diagnosisWhere(
    const events::DiagnosisRecord& d);  // |a-b| / max(|a|,|b|), 0 when both 0

}  // namespace stagescope::analysis
