// Records that carry NaN or Inf (transfer and gradient statistics, losses), in causal order
// (Causal.h): the first one is where a non-finite value first appeared.  `check`'s nonfinite
// class and the viewer's Find ▸ NaN/Inf use this list.
#pragma once

#include <cstdint>
#include <vector>

#include "core/analysis/Causal.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct NonFiniteRecord {
  enum class Kind : uint8_t { Transfer, Gradient, Loss } kind = Kind::Transfer;
  int64_t index = -1;  // into run.transfers / run.gradients / run.losses
  int rank = -1, iteration = -1, microbatch = -1;
  CausalKey causal;
};

// Every non-finite record, first in causal order first.  Reference and initial-parameter
// gradients are not part of the run's causality and are left out.
std::vector<NonFiniteRecord> nonFiniteInCausalOrder(const model::RunModel& run);
// Same with an order already built for `run`.
std::vector<NonFiniteRecord> nonFiniteInCausalOrder(const model::RunModel& run,
                                                    const CausalOrder& order);

bool isNonFinite(const events::TransferRecord& t);
bool isNonFinite(const events::GradientRecord& g);

}  // namespace stagescope::analysis
