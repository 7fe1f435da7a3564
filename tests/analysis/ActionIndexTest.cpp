// analysis::ActionIndex (core/analysis/Pairing.h) gives findAction's answer for every lookup:
// present and absent (rank, iteration, seq), ranks out of range and empty, iterations with
// gaps, seq numbers that skip, executed and planned lists.
#include <gtest/gtest.h>

#include <random>

#include "core/analysis/Pairing.h"

namespace stagescope::analysis {
namespace {

model::RunModel randomRun(unsigned seed) {
  std::mt19937 rng(seed);
  model::RunModel run;
  const int ranks = 5;
  run.actions.resize(ranks);
  run.plan.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    if (r == 2) continue;  // a rank with no actions
    for (auto* lists : {&run.actions, &run.plan}) {
      for (int it = 0; it < 40; ++it) {
        if (rng() % 5 == 0) continue;  // an iteration this rank lacks
        int seq = 0;
        for (int k = static_cast<int>(rng() % 12); k > 0; --k) {
          events::ActionRecord a;
          a.rank = r;
          a.iteration = it;
          seq += 1 + static_cast<int>(rng() % 3);  // sorted, with holes
          a.seq = seq;
          (*lists)[static_cast<size_t>(r)].push_back(a);
        }
      }
    }
  }
  return run;
}

TEST(ActionIndex, FindsWhatFindActionFinds) {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const model::RunModel run = randomRun(seed);
    for (const bool planned : {false, true}) {
      const ActionIndex index(run, planned);
      int64_t found = 0;
      for (int rank = -1; rank <= 6; ++rank)
        for (int it = -1; it <= 41; ++it)
          for (int seq = -1; seq <= 40; ++seq) {
            const int64_t want = findAction(run, rank, it, seq, planned);
            ASSERT_EQ(index.find(rank, it, seq), want)
                << "seed " << seed << " rank " << rank << " iteration " << it << " seq " << seq;
            found += want >= 0;
          }
      EXPECT_GT(found, 100);  // the lookups hit actions, not only misses
    }
  }
}

}  // namespace
}  // namespace stagescope::analysis
