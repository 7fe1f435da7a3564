#include "ui/RunComparison.h"

#include "core/analysis/RecordFilter.h"
#include "storage/RunReader.h"

namespace stagescope::ui {

std::shared_ptr<const analysis::Comparison> compareForViewer(const LoadedRun& a,
                                                             const LoadedRun& b) {
  analysis::CompareOptions opts;
  opts.labelA = a.model.path;
  opts.labelB = b.model.path;
  opts.filterA = analysis::recordFilterOf(a.model);
  opts.filterB = analysis::recordFilterOf(b.model);
  // At level full the comparison judges values, as `stagescope compare` does: the viewer holds
  // its runs without payloads, so the comparison reads them with payloads.
  const bool full = a.model.info.level == events::RecordLevel::Full ||
                    b.model.info.level == events::RecordLevel::Full;
  if (full && !a.model.path.empty() && !b.model.path.empty()) {
    storage::LoadOptions load;
    load.payloads = true;
    const model::RunModel pa = storage::loadRun(a.model.path, load);
    const model::RunModel pb = storage::loadRun(b.model.path, load);
    return std::make_shared<const analysis::Comparison>(analysis::compareRuns(pa, pb, opts));
  }
  return std::make_shared<const analysis::Comparison>(
      analysis::compareRuns(a.model, b.model, opts));
}

int64_t firstDivergentTransfer(const analysis::Comparison& c) {
  if (!c.first || c.first->kind != analysis::ItemKind::Transfer) return -1;
  return c.first->a;
}

}  // namespace stagescope::ui
