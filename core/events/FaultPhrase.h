// The kinds of a planted fault as one phrase, the words its `fault_injected` diagnosis uses
// between parentheses ("fault injection (delay 8 s,drop) on rank 1's send of ..."): the engine
// writes it, the hang graph quotes it, and the reader reads it back from a file written before
// planted faults had a table of their own (docs/run-file.md "injected_faults").  Torch-free.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/events/Events.h"

namespace stagescope::events {

// "delay 8 s", "corrupt,nan", "delay 0.5 s,drop": the kinds in order, a delay with its length.
std::string faultPhrase(const InjectedFaultRecord& fault);

// The kinds and delay of `phrase` (faultPhrase's words) into `fault`.
void readFaultPhrase(std::string_view phrase, InjectedFaultRecord* fault);

// The comma list of kind names a run file stores ("delay,drop") as names.
std::vector<std::string> splitFaultKinds(std::string_view text);

}  // namespace stagescope::events
