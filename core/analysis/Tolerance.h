// The tolerance rule: how far two float results may differ and still be called equal.
//
// Two runs of the same model, seed and global batch on different TP/PP/DP layouts compute the
// same mathematics with sums in another order, so their float results differ by round-off.
// Differences are measured as a relative L2 distance over a whole tensor,
//
//   rel = ||a - b|| / max(||a||, ||b||, floorRel * (whole-model norm of that iteration)),
//
// and, at level full in float32 where both sides start from the same parameters, also element
// by element relative to the tensor's scale (elementDistance, kElementBound).  Never element-wise
// across trajectories: Adam divides each element's gradient by its own running RMS, so float32
// round-off in an element whose gradient is ~0 becomes a full-size (lr) step after iteration 0,
// and element-wise differences of later iterations are unbounded for correct runs.  The
// floor keeps gradients that are zero analytically (attention key biases: ~1e-9 in every layout)
// from dividing round-off by round-off.  bfloat16 gradients against the float32 reference are
// also judged by their scale along it (scaleDeviation, scaleBound).
//
// Bounds per iteration (float32; check's reference restarts each iteration from the run's
// parameters where the file holds them, docs/analysis.md; measured on 5 correct layout pairs of
// assets/configs/default.toml over 6 iterations, and on 117 random correct layouts against their
// reference, docs/analysis.md):
//   iteration 0    gradients and messages 1e-4 (measured max 4.1e-6 between layouts, 3.5e-5
//                  against the reference: a small attention q gradient, where the engine is
//                  1.7e-5 and the reference 8e-6 from the float64 recomputation), losses 1e-6
//   iteration >= 1 gradients and messages 1e-3 (measured max 8.3e-5), losses 1e-5 (7.6e-7)
// A file whose two TP shards of one gradient were swapped differs by ~1.41; one gradient scaled
// by 1.5 by 0.33: both far outside every bound.
//
// bfloat16/float16 runs: 0.15 for every iteration and kind (bf16 has 8 mantissa bits).  check's
// reference_gradient scales it per gradient (lowPrecisionGradientBound): the reference computes
// each iteration from the run's own parameters in float32 and in the run's dtype, and the
// bound is max(0.2, 3 x the run-dtype computation's distance from float32) — bfloat16's own
// arithmetic moves some gradients of small models by up to 0.58 (docs/analysis.md, "bfloat16").
// `--tol X` replaces the rule by X for every iteration and kind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/RunModel.h"

namespace stagescope::analysis {

enum class ValueKind { Gradient, Transfer, Loss };

struct ToleranceRule {
  double gradientFirst = 1e-4, gradientLater = 1e-3;
  double lossFirst = 1e-6, lossLater = 1e-5;
  double floorRel = 1e-3;     // of the whole model's gradient norm of the iteration
  double override = -1;       // >= 0: one tolerance for every iteration and kind (--tol)
  bool lowPrecision = false;  // either run computes in bfloat16/float16
  // lowPrecisionGradientBound: max(base, factor x d) (docs/analysis.md, "bfloat16", gives the
  // measurement: on 104 random layouts the worst gradient reached 0.74 of this bound; a gradient
  // scaled by 1.5 is 0.33 away).
  static constexpr double kDtypeDeviationBase = 0.2;
  static constexpr double kDtypeDeviationFactor = 3.0;
  // float32, an iteration on the reference's own trajectory: the run's float32 trajectory and
  // the reference's part from each other as chaos amplifies their (different) round-off, which
  // the float64 twin only samples: on the layout of tests/engine/sweep/adam_key_bias_trajectory
  // (Adam lr 0.05, level stats, 8 iterations) the run's gradients reached 6.1 x the twin's
  // distance d (a rounding change in the model's forward moved it from below 3 x); on 23 random
  // float32 layouts of the sweep at most 0.8 x.  10 keeps 1.6 x that worst case.
  static constexpr double kTrajectoryDeviationFactor = 10.0;
  // The factor scaledGradientBound applies to the spread under this rule.
  double deviationFactor() const {
    return lowPrecision ? kDtypeDeviationFactor : kTrajectoryDeviationFactor;
  }

  // float32 element-wise bound (elementDistance), where both sides were computed from the same
  // parameters: check's reference_gradient on every iteration that restarted from the run's
  // parameters (iteration 0 always), compare's reduced gradients of iteration 0.  Evidence
  // (docs/analysis.md, "Element-wise at level full"): on 4,845 gradients of 26 correct random
  // layouts the worst element was 1.2e-5 from the reference, across layouts in iteration 0
  // 5.1e-6; one element x 1.001 is 1e-3.
  static constexpr double kElementBound = 1e-4;
  // The element-wise bound, or -1 where the element rule does not apply: --tol, bfloat16/float16
  // (judged by their scale instead), or sides computed from different parameters (a float32
  // trajectory: Adam turns round-off in near-zero elements into lr-sized steps).
  double elementBound(bool sameParameters) const {
    return override >= 0 || lowPrecision || !sameParameters ? -1 : kElementBound;
  }
  // bfloat16/float16 against the float32 reference (check's reference_gradient): the bound on
  // |scaleDeviation| is max(kScaleBase, kScaleFactor x d), d the relative L2 of the reference's
  // own run-dtype computation from the truth (the d of the relative L2 bound).  On 8,574 bf16
  // gradients of 40 correct runs the worst reached 0.78 of it; a gradient scaled by 1.2 is 0.2
  // (docs/analysis.md, "bfloat16: the scale of a gradient").
  static constexpr double kScaleBase = 0.05;
  static constexpr double kScaleFactor = 3.0;
  // The bound on |scaleDeviation| given that d (`spread`), or -1 where the scale rule does not
  // apply (float32, --tol, or no run-dtype computation: spread < 0).
  double scaleBound(double spread) const;

  // The relative L2 bound for a value of `kind` in `iteration`.
  double bound(ValueKind kind, int iteration) const;
  // check's reference_gradient where the reference also computed the gradient a second way
  // (app/ReferenceRecord.h), whose relative L2 distance `spread` from the float32 truth says how
  // far round-off alone moves this tensor:
  //  - low-precision run: in the run's dtype from the same parameters; the bound is
  //    max(kDtypeDeviationBase, kDtypeDeviationFactor x spread);
  //  - float32 run, an iteration on the reference's own trajectory: on a float64 trajectory from
  //    the same start (Adam carries float32 round-off into lr-sized steps); the bound is
  //    max(bound(), kTrajectoryDeviationFactor x spread).
  // spread < 0 or not finite (not recorded), or --tol: bound().
  double scaledGradientBound(int iteration, double spread) const;
  // One sentence stating the rule (for reports).
  std::string describe() const;
};

// The rule for values computed in `dtype` (check's reference_gradient, compare): float32 /
// float64 use the bounds above; bfloat16/float16 the low-precision bound.  `override` >= 0
// (--tol) replaces it.
ToleranceRule toleranceFor(const std::string& dtype, double override = -1);

// The distance of two losses, as check (against the reference) and compare (between runs) both
// judge them: 0 when equal (NaN equals NaN), infinite when either is not finite, else
// |a - b| / max(1, |a|, |b|): relative above 1, absolute below. A cross-entropy is
// logsumexp(z) - z_y over logits of magnitude ~1, so its float32 round-off is a few ulps of the
// logits (~1e-7) whatever the loss's own size: a confident prediction's loss of 0.025 was
// 1.2e-7 (relative 4.6e-6) from the reference on a correct run (docs/analysis.md).
double lossDistance(double a, double b);

// The compute dtype of a run, which picks its rule: the dtype of its first reduced gradient, else
// of its first message, else "" (no record says; callers that must pick a rule take float32).  Only
// reduced gradients, so that a model loaded with storage::LoadOptions::onlyReducedGradients
// (`compare`) gets the rule a whole model (the viewer, `check`) gets.
std::string computeDtypeOf(const model::RunModel& run);
bool isLowPrecision(const std::string& dtype);
// The same rule for the dtype a run was configured to compute in.
inline bool isLowPrecision(events::Dtype dtype) {
  return isLowPrecision(std::string(events::toString(dtype)));
}

// Relative L2 distance with the floor (see the header comment).  NaN/Inf anywhere on one side
// only gives +inf; equal non-finite patterns compare their finite elements.
struct ValueDistance {
  bool bitwiseEqual = false;
  bool sizesMatch = true;
  double rel = 0;      // ||a-b|| / max(||a||, ||b||, floor)
  double maxAbs = 0;   // max |a-b| over finite pairs
  int64_t worst = -1;  // index of the largest |a-b| (first non-finite mismatch wins)
  int64_t nonFiniteA = 0, nonFiniteB = 0;
};
ValueDistance valueDistance(const std::vector<double>& a, const std::vector<double>& b,
                            double floor);

// Element-wise distance of `a` from `b` (equal sizes, finite pairs only), each element's
// difference relative to the tensor's scale there:
//   ratio = max_i |a_i - b_i| / max(|a_i|, |b_i|, rms(a), rms(b), floor)
// Relative to the element itself where it is larger than the tensor's RMS, to the RMS below it:
// float32 round-off in an element that cancels to ~0 is a few ulps of its terms, which are of the
// tensor's typical size, not of its own; `floor` (the relative-L2 floor, 1e-3 x the model's
// gradient norm) keeps tensors that are zero analytically from dividing round-off by round-off.
// One element x 1.001 of any tensor, where it is at least the tensor's RMS, is 1e-3 however large
// the tensor, while the relative L2 of that defect shrinks as 1/sqrt(n).
struct ElementDistance {
  double ratio = 0;    // the largest |a_i - b_i| / scale_i (0 when bitwise equal)
  int64_t worst = -1;  // its index
  double scale = 0;    // scale_i there
};
ElementDistance elementDistance(const std::vector<double>& a, const std::vector<double>& b,
                                double floor);

// How much of `a`'s difference from the reference `ref` is a scaling of it:
//   s = <a - ref, ref> / max(||ref||, floor)^2,  so a = (1 + s) ref + (a part orthogonal to ref)
// A gradient scaled by c has s = c - 1 whatever the tensor; bfloat16 round-off is mostly
// orthogonal to the gradient (|s| <= relative L2, Cauchy-Schwarz, and far below it on all but
// the smallest tensors).  0 for unequal sizes or non-finite values (the L2 rule judges those).
double scaleDeviation(const std::vector<double>& a, const std::vector<double>& ref, double floor);

}  // namespace stagescope::analysis
