// Aligns two runs by logical identity, never by rank number, so runs with different TP/PP/DP
// layouts line up (DESIGN "Layout independence"):
//   transfer  edge + direction + iteration + microbatch + sender's dp replica
//             (TP ranks carry the same replicated activation; the lowest tp is compared)
//   gradient  parameter + phase + iteration + microbatch (+ dp replica for accumulated);
//             shards are compared by checksum when both runs shard the parameter the same
//             way, otherwise by the full norm sqrt(sum of shard norms^2)
//   loss      iteration + microbatch + dp replica
// Items are ordered along the step (iteration, microbatch, activations before losses before
// gradients) so the first differing item is the first divergence.  ImGui-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "storage/RunModel.h"

namespace stagescope::ui {

enum class AlignKind : uint8_t { Transfer, Loss, Gradient };
enum class AlignState : uint8_t { Same, Differ, OnlyA, OnlyB };
const char* toString(AlignKind k);
const char* toString(AlignState s);

struct AlignedItem {
  AlignKind kind = AlignKind::Transfer;
  std::string key;  // human-readable logical identity
  int iteration = -1, microbatch = -1;
  int order = 0;  // position inside an (iteration, microbatch): see header comment
  AlignState state = AlignState::Same;
  int64_t a = -1, b = -1;  // representative record index (transfers/gradients/losses) per run
  double valueA = 0, valueB = 0;  // loss, full norm, or 0 for transfers
  uint64_t checksumA = 0, checksumB = 0;
};

struct Alignment {
  std::vector<AlignedItem> items;  // in step order
  int64_t firstDivergence = -1;    // index into items of the first Differ, or -1
  size_t same = 0, differ = 0, onlyA = 0, onlyB = 0;
};

Alignment alignRuns(const storage::RunModel& a, const storage::RunModel& b,
                    double relTolerance = 1e-6);

}  // namespace stagescope::ui
