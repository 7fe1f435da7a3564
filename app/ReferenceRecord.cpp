#include "app/ReferenceRecord.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <map>
#include <optional>

#include "core/analysis/Tolerance.h"
#include "core/analysis/Values.h"
#include "core/engine/Reference.h"
#include "core/engine/TensorDigest.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"

namespace stagescope::app {
namespace {

using Params = std::map<std::string, at::Tensor>;

// The parameters every rank starts from: the layout-independent float32 draw rounded to the
// run's dtype (StageModel holds its shard of the draw in that dtype), upcast back to float32.
Params initialParamsAsHeld(const plan::RunConfig& float32, events::Dtype dtype) {
  Params p = engine::referenceInitialParams(float32);
  const at::ScalarType held = engine::scalarTypeOf(dtype);
  for (auto& [name, value] : p) value = value.to(held).to(at::kFloat);
  return p;
}

// The run's parameters after the optimizer step of every recorded iteration, gathered from the
// recorded shards (values at level full): iteration -> full parameters in float32 (bfloat16
// values are exact in float32).  An iteration is present only when every parameter of the
// model was recorded whole with values.
std::map<int, Params> recordedParamsAfterStep(const std::string& runPath, const Params& names) {
  storage::LoadOptions opts;
  opts.payloads = true;
  const auto run = storage::loadRun(runPath, opts);
  std::map<int, Params> byIteration;
  std::map<int, bool> whole;
  for (const auto& g : analysis::gatherGradients(run, events::GradPhase::ParamAfterStep, true)) {
    bool& isWhole = whole.emplace(g.iteration, true).first->second;
    if (!g.complete || !g.hasValues || !names.count(g.param)) {
      isWhole = false;
      continue;
    }
    const at::Tensor t = at::tensor(at::ArrayRef<double>(g.values), at::kDouble);
    byIteration[g.iteration][g.param] = t.reshape(g.fullShape).to(at::kFloat);
  }
  for (auto& [it, params] : byIteration) {
    if (!whole[it] || params.size() != names.size()) params.clear();
  }
  return byIteration;
}

// One iteration of the reference: the float32 gradients (the truth) and a second computation
// of them whose distance from the truth scales check's bound per tensor
// (core/analysis/Tolerance.h):
//  - low-precision run: the same gradients computed in the run's dtype from the same parameters
//    (how far that dtype's arithmetic alone lands from the truth);
//  - float32 run, an iteration on the reference's own trajectory (not restarted from the run's
//    parameters): the gradients of a float64 trajectory from the same start (how far float32
//    round-off alone has carried the trajectory by then; Adam amplifies it).
//  Empty otherwise.
struct Iteration {
  engine::ReferenceIteration truth;
  std::map<std::string, at::Tensor> inRunDtype;
};

// The bfloat16 reference (ReferenceRecord.h): iteration t from the run's own parameters at the
// start of t; nullopt for an iteration whose parameters the file does not hold.
std::vector<std::optional<Iteration>> ownParameterReference(const plan::RunConfig& config,
                                                            const plan::RunConfig& float32,
                                                            const std::string& runPath) {
  // One intra-op thread, as the ranks use: the result does not depend on the machine's cores,
  // and on a busy machine OpenMP's spinning threads made this 5-20x slower (fan_out: 37 s).
  struct OneThread {
    int before = at::get_num_threads();
    OneThread() { at::set_num_threads(1); }
    ~OneThread() { at::set_num_threads(before); }
  } oneThread;
  const Params initial = initialParamsAsHeld(float32, config.dtype);
  std::map<int, Params> after;
  if (!config.forwardOnly && config.iterations > 1) {
    after = recordedParamsAfterStep(runPath, initial);
  }
  std::vector<std::optional<Iteration>> out;
  for (int it = 0; it < config.iterations; ++it) {
    const Params* start = &initial;  // iteration 0, and every iteration of a forward-only run
    if (it > 0 && !config.forwardOnly) {
      auto found = after.find(it - 1);
      start = found == after.end() || found->second.empty() ? nullptr : &found->second;
    }
    if (!start) {
      std::printf(
          "reference: iteration %d not computed: the %s run's parameters after the step of "
          "iteration %d are not in the file with values (recorded at level full, kept by the "
          "record filter)\n",
          it, events::toString(config.dtype), it - 1);
      out.emplace_back();
      continue;
    }
    const auto batch = engine::generatedBatch(float32, it);
    Iteration r{engine::referenceStep(float32, *start, batch), {}};
    // The run's parameters are exact in its dtype, so this model starts from the same values.
    r.inRunDtype = engine::referenceStep(config, *start, batch).gradients;
    out.emplace_back(std::move(r));
  }
  return out;
}

// The float32 reference (ReferenceRecord.h): its own trajectory, restarted at every iteration
// whose starting parameters the run recorded (level full).  Adam turns round-off in a gradient
// that is ~0 analytically into a step of up to lr, so two float32 trajectories part after one
// step; the optimizer step itself is judged by check from the run's own parameters and reduced
// gradients (core/analysis/OptimizerStep.h).  Iterations >= 1 left on the reference's own
// trajectory also get the float64 trajectory's gradients from the same start, which scale their
// bound (docs/analysis.md, "float32").
std::vector<std::optional<Iteration>> float32Reference(const plan::RunConfig& config,
                                                       const plan::RunConfig& float32,
                                                       const std::string& runPath) {
  const bool trains = !config.forwardOnly && config.iterations > 1;
  std::map<int, Params> after;
  if (trains && config.record.level == events::RecordLevel::Full) {
    after = recordedParamsAfterStep(runPath, engine::referenceInitialParams(float32));
  }
  std::vector<std::optional<Iteration>> out;
  for (auto& r : engine::runReference(float32, config.iterations, after)) {
    out.emplace_back(Iteration{std::move(r), {}});
  }
  bool ownTrajectory = false;
  for (int it = 1; trains && it < config.iterations; ++it) ownTrajectory |= !after.count(it - 1);
  if (!ownTrajectory) return out;
  // The same trajectory in float64, from the same initial draw and the same restarts.
  plan::RunConfig float64 = float32;
  float64.dtype = events::Dtype::Float64;
  std::map<int, Params> start = after;
  start[-1] = engine::referenceInitialParams(float32);
  for (auto& [it, params] : start) {
    for (auto& [name, value] : params) value = value.to(at::kDouble);
  }
  auto twin = engine::runReference(float64, config.iterations, start);
  for (int it = 1; it < config.iterations; ++it) {
    if (!after.count(it - 1)) out[it]->inRunDtype = std::move(twin[it].gradients);
  }
  return out;
}

}  // namespace

void recordReference(const plan::RunConfig& config, const std::string& runPath) {
  // The reference is the float32 truth whatever the run computes in: a bfloat16 run is judged
  // against it with the low-precision bound (core/analysis/Tolerance.h, docs/analysis.md).
  plan::RunConfig float32 = config;
  float32.dtype = events::Dtype::Float32;
  std::vector<std::optional<Iteration>> iterations;
  if (analysis::isLowPrecision(config.dtype)) {
    iterations = ownParameterReference(config, float32, runPath);
  } else {
    iterations = float32Reference(config, float32, runPath);
  }
  const std::string shard = runPath + ".reference.shard";
  auto writer = storage::ShardWriter::open(shard, events::RecordLevel::Full, -1);
  for (int it = 0; it < static_cast<int>(iterations.size()); ++it) {
    if (!iterations[it]) continue;
    const auto& ref = iterations[it]->truth;
    const int dp = config.llm().dp;
    for (size_t k = 0; k < ref.microbatchLosses.size(); ++k) {
      writer->referenceLoss(
          {-1, it, static_cast<int>(k) / dp, static_cast<int>(k) % dp, ref.microbatchLosses[k]});
    }
    writer->referenceLoss({-1, it, -1, 0, ref.loss});
    // The truth (float32) first, then the run-dtype gradients: check tells them by dtype.
    const Params* sets[] = {&ref.gradients, &iterations[it]->inRunDtype};
    for (const Params* grads : sets) {
      for (const auto& [name, grad] : *grads) {
        events::GradientRecord r;
        r.rank = -1;
        r.iteration = it;
        r.phase = events::GradPhase::Reference;
        r.param = name;
        r.module = name.substr(0, name.find('.'));
        r.shape = engine::shapeOf(grad);
        r.fullShape = r.shape;
        r.dtype = engine::dtypeName(grad);
        const auto d = engine::digest(grad);
        r.checksum = d.checksum;
        r.stats = d.stats;
        r.hasStats = true;
        r.norm = d.stats.l2;
        r.payload = engine::hostBytes(grad);
        writer->referenceGradient(std::move(r));
      }
    }
    std::printf("reference: iteration %d  loss %.6f\n", it, ref.loss);
  }
  writer->close();
  storage::mergeShards(runPath, {shard});
}

}  // namespace stagescope::app
