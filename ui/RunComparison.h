// The viewer's compare: analysis::compareRuns over the open run (A) and the compare run (B),
// with the options `stagescope compare` uses (labels = the paths, payloads at level full), so
// the panel, the CLI and the reports give the same verdict and name the same first
// divergence (Comparison::first, in causal order).  No comparison rule lives in the viewer:
// record filters too come from analysis::recordFilterOf, so a run recorded with
// `record.ranks/modules/iterations` compares in the viewer exactly as in the CLI.
// ImGui-free.
#pragma once

#include <cstdint>
#include <memory>

#include "core/analysis/Compare.h"
#include "ui/LoadedRun.h"

namespace stagescope::ui {

std::shared_ptr<const analysis::Comparison> compareForViewer(const LoadedRun& a,
                                                             const LoadedRun& b);

// The transfer of run A that is the first divergence (-1 when the first divergence is not a
// message, or is absent from A).
int64_t firstDivergentTransfer(const analysis::Comparison& c);

}  // namespace stagescope::ui
