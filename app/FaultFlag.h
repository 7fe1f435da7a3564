// `stagescope run --fault KIND:key=value,...`: the command-line form of a `[[faults]]` table.
#pragma once

#include <stdexcept>
#include <string>

namespace stagescope::app {

// Thrown for a malformed --fault value; the message is one line naming the flag, the part
// and what was expected.
class FaultFlagError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Translates "drop:iteration=0,microbatch=1,module=llm,stage=0,direction=activation" into the
// TOML text of one `[[faults]]` table (appended to the config, then validated with it).
// Keys: iteration, microbatch, module, stage, direction, delay (or delay_seconds), rank.
std::string faultFlagToToml(const std::string& spec);

}  // namespace stagescope::app
