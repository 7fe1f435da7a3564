#include "core/analysis/ScheduleOrder.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "core/events/CapturedLayout.h"

namespace stagescope::analysis {
namespace {

std::string token(const events::ActionRecord& a) {
  std::string t = events::toString(a.kind);
  if (a.microbatch >= 0) t += " mb" + std::to_string(a.microbatch);
  return t;
}

// Whether token(a) == token(b).
bool sameToken(const events::ActionRecord& a, const events::ActionRecord& b) {
  return a.kind == b.kind && (a.microbatch >= 0 ? a.microbatch == b.microbatch : b.microbatch < 0);
}

// The first position where a rank's two action lists differ: (iteration, position in the
// iteration); false when they are the same.
bool firstDifference(const std::vector<events::ActionRecord>& x,
                     const std::vector<events::ActionRecord>& y, int* iteration, int64_t* position,
                     std::string* opA, std::string* opB) {
  size_t i = 0, j = 0;
  while (i < x.size() || j < y.size()) {
    // The iteration both are in: the lower of the two next actions'.
    const int it = std::min(i < x.size() ? x[i].iteration : INT32_MAX,
                            j < y.size() ? y[j].iteration : INT32_MAX);
    int64_t pos = 0;
    for (;; ++pos) {
      const bool hasX = i < x.size() && x[i].iteration == it;
      const bool hasY = j < y.size() && y[j].iteration == it;
      if (!hasX && !hasY) break;
      // Compared as the tokens they print (kind, and microbatch when one): the strings are
      // made only for the difference reported, not for each of millions of actions.
      if (hasX != hasY || (hasX && !sameToken(x[i], y[j]))) {
        *iteration = it;
        *position = pos;
        *opA = hasX ? token(x[i]) : "(none)";
        *opB = hasY ? token(y[j]) : "(none)";
        return true;
      }
      ++i;
      ++j;
    }
  }
  return false;
}

}  // namespace

ScheduleDifference compareSchedules(const model::RunModel& a, const model::RunModel& b) {
  ScheduleDifference d;
  if (a.info.worldSize != b.info.worldSize) return d;
  if (a.info.captured() != b.info.captured()) {
    d.whyNot = "one run is a captured job, whose actions are its messages only";
    return d;
  }
  d.compared = true;
  const size_t ranks = std::min(a.actions.size(), b.actions.size());
  for (size_t r = 0; r < ranks; ++r) {
    if (a.actions[r].empty() && b.actions[r].empty()) continue;
    ++d.ranksCompared;
    int it = -1;
    int64_t pos = -1;
    std::string opA, opB;
    if (!firstDifference(a.actions[r], b.actions[r], &it, &pos, &opA, &opB)) continue;
    ++d.ranksDiffering;
    if (d.rank < 0 || std::tie(it, pos) < std::tie(d.iteration, d.position)) {
      d.rank = static_cast<int>(r);
      d.iteration = it;
      d.position = pos;
      d.opA = opA;
      d.opB = opB;
    }
  }
  return d;
}

std::string ScheduleDifference::describe(const std::string& labelA,
                                         const std::string& labelB) const {
  if (!compared) return "not compared (" + whyNot + ")";
  if (!differs()) return "same order on all " + std::to_string(ranksCompared) + " ranks";
  return "differ on " + std::to_string(ranksDiffering) + " of " + std::to_string(ranksCompared) +
         " ranks; first: rank " + std::to_string(rank) + " iteration " + std::to_string(iteration) +
         " op #" + std::to_string(position) + ": " + labelA + " " + opA + ", " + labelB + " " + opB;
}

}  // namespace stagescope::analysis
