// `stagescope run --fault KIND:key=value,...`: the command-line form of a `[[faults]]` table.
#pragma once

#include <stdexcept>
#include <string>

#include "core/plan/Config.h"

namespace stagescope::app {

// Thrown for a malformed --fault value; the message is one line naming the flag, the part,
// the value and what was expected (for a number: the valid range of the config it runs with).
class FaultFlagError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Translates "drop:iteration=0,microbatch=1,module=llm,stage=0,direction=activation" into the
// TOML text of one `[[faults]]` table (appended to the config, then validated with it).
// Keys: iteration, microbatch, module, stage, direction, delay (or delay_seconds), rank.
// Numbers are checked against `cfg`, the config the fault is added to (iteration in
// 0..iterations-1, microbatch in 0..microbatches-1, rank in -1..world_size-1, stage in
// -1..largest pp-1, delay in [0, 86400] s), so an out-of-range value is named with its range
// rather than as "not an integer".
std::string faultFlagToToml(const std::string& spec, const plan::RunConfig& cfg);

}  // namespace stagescope::app
