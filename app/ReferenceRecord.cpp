#include "app/ReferenceRecord.h"

#include <ATen/ATen.h>

#include <cstdio>

#include "core/engine/Reference.h"
#include "core/engine/TensorDigest.h"
#include "storage/Merge.h"
#include "storage/ShardWriter.h"

namespace stagescope::app {

void recordReference(const plan::RunConfig& config, const std::string& runPath) {
  // The reference is the float32 truth whatever the run computes in: a bfloat16 run is judged
  // against it with the low-precision bound (core/analysis/Tolerance.h, docs/analysis.md).
  plan::RunConfig float32 = config;
  float32.dtype = "float32";
  const auto iterations = engine::runReference(float32, config.iterations);
  const std::string shard = runPath + ".reference.shard";
  auto writer = storage::ShardWriter::open(shard, events::RecordLevel::Full, -1);
  for (int it = 0; it < static_cast<int>(iterations.size()); ++it) {
    const auto& ref = iterations[it];
    const int dp = config.llm().dp;
    for (size_t k = 0; k < ref.microbatchLosses.size(); ++k) {
      writer->referenceLoss(
          {-1, it, static_cast<int>(k) / dp, static_cast<int>(k) % dp, ref.microbatchLosses[k]});
    }
    writer->referenceLoss({-1, it, -1, 0, ref.loss});
    for (const auto& [name, grad] : ref.gradients) {
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
    std::printf("reference: iteration %d  loss %.6f\n", it, ref.loss);
  }
  writer->close();
  storage::mergeShards(runPath, {shard});
}

}  // namespace stagescope::app
