// The gradient audit: each module's data-parallel reduction, judged from one captured run
// without a twin.
//
// A captured Megatron job that records its reduction (stagescope_torch.megatron.
// audited_finalize: per module replica the gradients before the reduction, phase `accumulated`,
// and after it, phase `reduced`, plus a `module_steps` row with the module's own loss
// normalisation, events/ModuleStep.h) is judged against what the declared layout implies
// (docs/schedule.md §7.1).  Per (iteration, module, parameter shard):
//
//     reduced  =  c  x  sum over the module's dp replicas of (its gradient before the reduction)
//
// with c = 1 / dp of the language model when the language model's loss is a mean, and
// c = 1 / (the global token count the language model recorded) when it is per-token: the loss
// is the language model's, so every module's gradient is normalised the way it is.
//
// Evidence: values at level full (payloads: the sum in float64, relative L2 with a floor of
// 1e-3 of the module's reduced gradient norm, bound of the run dtype's tolerance rule); at
// level stats the element sums (mean x numel of each record's statistics: the sum is linear, so
// the replicas' sums add up), labelled as such; with one replica and c = 1 (a mean loss, a
// language model of one replica) bitwise by checksums first; with one replica, norms last.
// A difference that is one uniform factor f over all of a module's parameters names its cause:
//
//   - normalisation:   the module's own normalisation differs from the language model's
//                      (Megatron-Bridge PR #5555): a mean module under a per-token language
//                      model reduced by a finalizer that assumes it summed gives 1/d_m; a
//                      per-token module under a mean language model gives d_m;
//   - own_dp:          both mean and f = d_L / d_m: the module averaged over its own dp instead
//                      of the language model's (§7.1; Megatron-Bridge PR #4066);
//   - tokens:          both per-token and f = N: never divided by the global token count N;
//   - unexplained:     any other factor, or no uniform factor.
//
// The recorded normalisation decides between normalisation and own_dp (their factors coincide
// when d_L = 1), never the factor alone.  core/analysis/Accumulation.h judges stagescope's own
// runs (no normalisation rows); the (iteration, module) pairs this audit judges it leaves alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/Tolerance.h"
#include "core/model/RunModel.h"

namespace stagescope::analysis {

struct AuditFinding {
  int iteration = -1;
  std::string module;
  std::string param;  // "" for a finding about the whole module (a uniform factor)
  int rank = -1;      // the reduced copy's rank
  std::string cause;  // "normalisation" | "own_dp" | "tokens" | "unexplained"
  double factor = 0;  // reduced / expected (NaN: no uniform factor)
  std::string sentence;
};

struct GradientAuditReport {
  int64_t judged = 0;              // parameter shards judged
  int64_t byValues = 0;            // of them by values (level full)
  int64_t byChecksums = 0;         // bitwise by checksums: one replica and c = 1
  int64_t bySums = 0;              // by element sums (level stats: no values)
  int64_t byNorms = 0;             // by norms (one replica, no statistics)
  int64_t notJudged = 0;           // a replica missing, non-finite values, no evidence
  std::vector<std::string> notes;  // why something was not judged, one line each
  std::vector<AuditFinding> findings;
  std::string summary() const;
};

GradientAuditReport auditGradients(const model::RunModel& run, const ToleranceRule& rule);

// Whether the audit judges the reduction of `module` in `iteration` (the run recorded its
// normalisation), so that Accumulation.h does not judge it a second time.
bool auditedReduction(const model::RunModel& run, int iteration, const std::string& module);

}  // namespace stagescope::analysis
