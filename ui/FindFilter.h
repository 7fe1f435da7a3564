// The Find panel's query over a run: actions, transfers or gradients filtered by rank,
// module, iteration, microbatch, kind, NaN/Inf (in causal order) and checksum mismatch.
// ImGui-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "storage/RunFileError.h"

namespace stagescope::ui {

enum class FindWhat : uint8_t { Actions, Transfers, Gradients };

struct FindQuery {
  FindWhat what = FindWhat::Transfers;
  int rank = -1;       // -1: any
  std::string module;  // "": any
  int iteration = -1;
  int microbatch = -1;
  int kind = -1;          // Actions: ActionKind; Transfers: Direction; Gradients: GradPhase
  bool nanInf = false;    // only records whose stats count NaN or Inf
  bool mismatch = false;  // only transfers whose pair's checksums differ
};

struct FindHit {
  FindWhat what = FindWhat::Transfers;
  int32_t rank = -1;
  int64_t index = -1;  // Actions: index in actions[rank]; else index in transfers/gradients
};

class ReplayOrder;

// At most `limit` hits, in model order; `total` receives the full count.  With `causal`, a
// NaN/Inf query lists transfers and gradients in causal order instead (the first hit is where
// a non-finite value first appeared: nonFiniteInCausalOrder).
std::vector<FindHit> findItems(const model::RunModel& model, const FindQuery& q, size_t limit,
                               size_t* total = nullptr, const ReplayOrder* causal = nullptr);

}  // namespace stagescope::ui
