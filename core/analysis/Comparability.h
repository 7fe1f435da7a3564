// Whether two runs are of the same model and data at all, before any item is aligned: the one
// place that refuses to compare unrelated runs (docs/analysis.md "Comparing two runs").
//
// Two layouts of one model and seed compute the same mathematics (the layout-independence
// contract), so compare aligns them item by item.  Two different models, vocabularies, sample
// shapes or seeds do not: any "first divergence" between them would name a difference that is
// the premise, not a finding.  Judged from what the files record:
//   * the seed and each module's role and sample shape (vocab, text length, patches, patch
//     size) from the settings (RunSetup.h);
//   * each parameter's full (unsharded) shape, from the gradient and parameter records both
//     runs hold: one parameter of another shape is another model.
// Captured jobs are not judged here (their settings are not recorded; compare says so itself).
#pragma once

#include <string>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

// "" when the runs may be compared; otherwise one line naming the first field that differs,
// with both values: "not the same model: module llm: vocab 8 in A, 16 in B".
std::string whyNotComparable(const model::RunModel& a, const model::RunModel& b,
                             const std::string& labelA, const std::string& labelB);

}  // namespace stagescope::analysis
