// The viewer's compare: analysis::compareRuns over the open run (A) and the compare run (B),
// with the options `stagescope compare` uses (labels = the paths, the first divergent
// message's payloads fetched from the files), so the panel, the CLI and the reports give the
// same verdict and name the same first divergence.  No comparison rule lives in the viewer.
// ImGui-free.
#pragma once

#include <cstdint>
#include <memory>

#include "core/analysis/Compare.h"
#include "ui/LoadedRun.h"

namespace stagescope::ui {

std::shared_ptr<const analysis::Comparison> compareForViewer(const LoadedRun& a,
                                                             const LoadedRun& b);

// The transfer of run A that shows the first divergence (-1 when there is none in A).
int64_t firstDivergentTransfer(const analysis::Comparison& c);

}  // namespace stagescope::ui
