// The schedule each rank actually ran, compared between two runs: per rank, the sequence of its
// recorded actions (kind and microbatch, in (iteration, seq) order).  Two schedules of one model
// (GPipe vs 1F1B) train on the same data but order their sends, receives, forwards and backwards
// differently; `compare` says so next to its value verdict, which this never changes (the
// order is not data).  For a captured job (no plan) the actions are its sends and receives
// (SF/RF/SB/RB; the microbatch is the message's index on its channel).
#pragma once

#include <cstdint>
#include <string>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct ScheduleDifference {
  bool compared = false;  // false: see whyNot
  // Why not compared: the world sizes differ, or one run is a captured job (its actions are its
  // messages only; Compare.h's captureAgainstPlan sets it against the other's plan instead).
  std::string whyNot = "different world sizes: ranks do not correspond";
  size_t ranksCompared = 0, ranksDiffering = 0;
  // The first difference: the lowest (iteration, position in the rank's iteration), then rank.
  int rank = -1, iteration = -1;
  int64_t position = -1;
  std::string opA, opB;  // "SF mb3"; "(none)" where that run has no action there
  bool differs() const { return ranksDiffering > 0; }
  // One sentence: "same on all 4 ranks" / "differ on 4 of 4 ranks; first: rank 3 iteration 0
  // op #1: A RF mb1, B SB mb0" / "not compared: ...".
  std::string describe(const std::string& labelA, const std::string& labelB) const;
};

ScheduleDifference compareSchedules(const model::RunModel& a, const model::RunModel& b);

}  // namespace stagescope::analysis
