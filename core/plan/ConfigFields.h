// The canonical form of a validated config: one (key, value) pair per field that defines the
// run, in a fixed order, with values printed one way ("0.01" and "1e-2" both print as 0.01).
// Two configs define the same run exactly when their canonical fields are equal, whatever
// their comments, key order or number spelling.  Torch-free.
//
// Covered: every field that changes the mathematics, the schedule, the wire protocol or what
// is recorded (seed, iterations, microbatches, micro_batch_size, dtype, device, backend,
// loss_scale, forward_only, optimizer.*, record.*, every module field, every fault).
// Not covered: timeout_seconds (how long a rank waits, not what it computes: hosts of one
// run may wait differently).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/plan/Config.h"

namespace stagescope::plan {

using ConfigField = std::pair<std::string, std::string>;  // ("optimizer.lr", "0.01")

std::vector<ConfigField> canonicalFields(const RunConfig& cfg);
// "key = value\n" per field, in canonicalFields order.
std::string canonicalText(const std::vector<ConfigField>& fields);
// Hex FNV-1a 64 of canonicalText(canonicalFields(cfg)): 16 lowercase hex digits.  The run
// file's run.config_hash and the rendezvous identity check both use this one function.
std::string configHash(const RunConfig& cfg);

}  // namespace stagescope::plan
