// How a run was configured, as the read side judges it: the resolved settings the run file
// records (events::RunSettings: seed, micro-batch size, dtype, forward_only, the optimizer, each
// module's role, dp and sample shape) and its record filter.
//
// Analysis reads these, never the stored config text: an old run is judged by what it ran
// with, not by what today's parser and defaults make of its text.  The one exception is here:
// a file recorded before the run file held them (no `run_settings` table, format 1 and early
// format 3 files) or a captured job (which records none; its text is the layout it declared,
// if any) gets them derived from the stored config text, by the same function the record side
// fills them with (plan::runSettings).  Likewise a format-1 file's record filter, which it
// did not store either.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct RunSetup {
  bool known = false;  // false: `why` says why (no stagescope config, or it does not parse)
  std::string why;
  bool fromConfigText = false;  // derived from the stored text (the fallback above)
  events::RunSettings settings;
  events::RecordFilter recordFilter;
  // The module settings of `name`, or nullptr.
  const events::ModuleSettings* module(const std::string& name) const;
  // The llm's settings, or nullptr.
  const events::ModuleSettings* llm() const;
};

RunSetup runSetupOf(const model::RunModel& run);

// The first layer of each pipeline stage, per module: where a P2P edge "m:ppS->ppT" cuts the
// module (before layer firstLayer[T]).  The run file's settings do not hold the layer split, so
// this is read from the stored config text (the second and last place analysis reads it);
// empty when the run has none (a captured job) or it does not parse.
std::map<std::string, std::vector<int>> stageFirstLayersOf(const model::RunModel& run);

}  // namespace stagescope::analysis
