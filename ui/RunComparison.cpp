#include "ui/RunComparison.h"

#include "storage/RunReader.h"

namespace stagescope::ui {

std::shared_ptr<const analysis::Comparison> compareForViewer(const LoadedRun& a,
                                                             const LoadedRun& b) {
  analysis::CompareOptions opts;
  opts.labelA = a.model.path;
  opts.labelB = b.model.path;
  opts.payload = [&](int which, int64_t index) -> std::vector<uint8_t> {
    return transferPayload(which == 0 ? a : b, index);
  };
  return std::make_shared<const analysis::Comparison>(
      analysis::compareRuns(a.model, b.model, opts));
}

int64_t firstDivergentTransfer(const analysis::Comparison& c) {
  if (!c.firstDivergent || !c.firstDivergent->a.present) return -1;
  return c.firstDivergent->a.index;
}

}  // namespace stagescope::ui
