// How the viewer writes durations, byte counts and hashes in its panels and tooltips.
#pragma once

#include <cstdint>
#include <string>

#include "core/analysis/Format.h"

namespace stagescope::ui {

std::string formatDuration(double ns);
std::string formatBytes(int64_t bytes);
using analysis::formatShape;  // one rule for shapes: core/analysis/Format.h
std::string hex64(uint64_t v);
// " mb3" for an action or message of microbatch 3; "" for one of none (-1: the optimizer
// step, an iteration's reductions), never " mb-1".
std::string microbatchSuffix(int microbatch);

}  // namespace stagescope::ui
