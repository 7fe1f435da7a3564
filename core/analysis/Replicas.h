// Copies of one tensor or loss that must be equal, compared copy by copy.
//
// Every data-parallel replica records its own copy of each reduced gradient, initial parameter
// and parameter after the step, and a parameter replicated across tensor-parallel ranks (a
// layer norm, a bias added after a reduction) has one copy per TP rank too.  The TP ranks of
// the llm's last stage each record the same microbatch's loss.  An all-reduce hands each member
// the same bytes, and replicas that start equal and step with equal gradients stay equal, so
// these copies are compared exactly: dtype, shape, checksum, and the values where both carry a
// payload (level full) -- never through a norm.
//
// The verdicts that read one copy of each tensor (reference_gradient, compare: the lowest
// (dp, tp) copy, as gatherGradients keeps it) are sound only together with this rule: a replica
// that drifted, or an all-reduce that handed one member other bytes, is seen here.  Per-microbatch
// (accumulated) gradients are not copies of each other (each replica saw other data).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/events/Events.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct ReplicaMismatch {
  bool loss = false;  // a loss copy (indices into run.losses), else a tensor (run.gradients)
  // The copy the others are held to (lowest (dp, tp), or the lowest rank for a loss) and the
  // copy that differs.
  int64_t first = -1, other = -1;
  std::string why;  // "checksum 0x.. vs 0x..", "shape [4] vs [8]", "element 3: 0.5 vs 0.25"
};

struct ReplicaReport {
  int64_t groups = 0;    // tensors or losses recorded more than once
  int64_t copies = 0;    // copies compared with their group's first
  int64_t unjudged = 0;  // copies with neither a checksum nor a payload (level meta)
  std::vector<ReplicaMismatch> mismatches;  // in (iteration, phase, name) order
};

ReplicaReport compareReplicas(const model::RunModel& run);

// One sentence naming the tensor (or loss), the two copies' ranks and how they differ; the text
// check and compare both print.
std::string describe(const model::RunModel& run, const ReplicaMismatch& m);

}  // namespace stagescope::analysis
