// Small formatting helpers shared by verdict messages and the writers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stagescope::analysis {

// Small helpers shared by verdict messages and the writers.
std::string formatChecksum(uint64_t checksum);  // 16 hex digits
std::string formatShape(const std::vector<int64_t>& shape);
double relativeDifference(double a, double b);  // |a-b| / max(|a|,|b|), 0 when both 0

}  // namespace stagescope::analysis
