#include "core/analysis/Values.h"

#include "core/analysis/Tolerance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>

namespace stagescope::analysis {

using model::RunModel;

bool decodeValues(const std::vector<uint8_t>& bytes, const std::string& dtype,
                  std::vector<double>* out) {
  out->clear();
  auto half = [](uint16_t h) {
    uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    double v;
    if (exp == 0) {
      v = std::ldexp(static_cast<double>(mant), -24);
    } else if (exp == 31) {
      v = mant ? std::nan("") : INFINITY;
    } else {
      v = std::ldexp(static_cast<double>(mant | 0x400u), static_cast<int>(exp) - 25);
    }
    return sign ? -v : v;
  };
  if (dtype == "float32" || dtype == "float") {
    if (bytes.size() % 4) return false;
    out->resize(bytes.size() / 4);
    for (size_t i = 0; i < out->size(); ++i) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      (*out)[i] = f;
    }
  } else if (dtype == "float64" || dtype == "double") {
    if (bytes.size() % 8) return false;
    out->resize(bytes.size() / 8);
    std::memcpy(out->data(), bytes.data(), bytes.size());
  } else if (dtype == "bfloat16" || dtype == "float16" || dtype == "half") {
    if (bytes.size() % 2) return false;
    out->resize(bytes.size() / 2);
    for (size_t i = 0; i < out->size(); ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      if (dtype == "bfloat16") {
        uint32_t w = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &w, 4);
        (*out)[i] = f;
      } else {
        (*out)[i] = half(h);
      }
    }
  } else {
    return false;
  }
  return true;
}

namespace {

using ShardList = std::vector<const events::GradientRecord*>;

// The distinct shards of one gathered gradient's records (`idx[i..j)`, sorted by partition): the
// first record of each (partitionDim, partitionOffset); their indices go to g.records.
ShardList distinctShards(const std::vector<events::GradientRecord>& records,
                         const std::vector<size_t>& idx, size_t i, size_t j, GatheredGradient& g) {
  ShardList shards;
  for (size_t k = i; k < j; ++k) {
    const auto& r = records[idx[k]];
    if (!shards.empty() && shards.back()->partitionDim == r.partitionDim &&
        shards.back()->partitionOffset == r.partitionOffset) {
      continue;
    }
    shards.push_back(&r);
    g.records.push_back(static_cast<int64_t>(idx[k]));
  }
  return shards;
}

// g's layout, norm, shard checksums, non-finite flag and completeness from its shards (`dim`:
// their partition dimension, < 0: replicated).
void describeShards(GatheredGradient& g, const ShardList& shards, int dim) {
  double sumSq = 0;
  int64_t covered = 0;
  if (dim < 0) {
    g.layout = "replicated";
  } else {
    g.layout = "dim";
    g.layout.append(std::to_string(dim)).append(":");
  }
  for (const auto* s : shards) {
    sumSq += s->norm * s->norm;
    g.shardChecksums.push_back(s->checksum);
    if (s->hasStats && (s->stats.nanCount > 0 || s->stats.infCount > 0)) g.nonFinite = true;
    if (!std::isfinite(s->norm)) g.nonFinite = true;
    if (dim >= 0 && static_cast<size_t>(dim) < s->shape.size()) {
      covered += s->shape[dim];
      char range[64];
      std::snprintf(range, sizeof range, "[%lld,%lld)", static_cast<long long>(s->partitionOffset),
                    static_cast<long long>(s->partitionOffset + s->shape[dim]));
      g.layout.append(range);
    }
  }
  g.norm = std::sqrt(sumSq);
  if (dim >= 0 && static_cast<size_t>(dim) < g.fullShape.size()) {
    g.complete = covered == g.fullShape[dim];
  } else if (dim >= 0) {
    g.complete = false;
  }
}

// Puts one shard's decoded values into g.values (the full tensor, row-major) at its offset along
// `dim` (< 0: replicated, the whole tensor); false when their count does not fit the shard.
bool placeShardValues(GatheredGradient& g, const events::GradientRecord& s,
                      const std::vector<double>& shardValues, int dim) {
  if (dim < 0) {
    if (shardValues.size() != g.values.size()) return false;
    g.values = shardValues;
    return true;
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= g.fullShape[d];
  for (size_t d = dim + 1; d < g.fullShape.size(); ++d) inner *= g.fullShape[d];
  int64_t extent = s.shape[dim];
  if (static_cast<int64_t>(shardValues.size()) != outer * extent * inner) return false;
  for (int64_t o = 0; o < outer; ++o) {
    std::copy_n(shardValues.begin() + o * extent * inner, extent * inner,
                g.values.begin() + (o * g.fullShape[dim] + s.partitionOffset) * inner);
  }
  return true;
}

// The full tensor of complete gradient g from its shards' payloads: g.hasValues, or, when one
// does not decode or fit, no values (and no memory held for them).
void assembleValues(GatheredGradient& g, const ShardList& shards, int dim) {
  int64_t total = 1;
  for (auto d : g.fullShape) total *= d;
  g.values.assign(static_cast<size_t>(std::max<int64_t>(total, 0)), 0.0);
  g.hasValues = true;
  std::vector<double> shardValues;
  for (const auto* s : shards) {
    if (s->payload.empty() || !decodeValues(s->payload, s->dtype, &shardValues) ||
        !placeShardValues(g, *s, shardValues, dim)) {
      g.hasValues = false;
      break;
    }
  }
  if (!g.hasValues) std::vector<double>().swap(g.values);  // and its memory
}

// One gathered gradient from its records (`idx[i..j)`, sorted by partition, dp and tp); values:
// assemble its full tensor when every shard carries a payload.
GatheredGradient gatherOne(const std::vector<events::GradientRecord>& records,
                           const std::vector<size_t>& idx, size_t i, size_t j, bool values,
                           bool perReplica) {
  const auto& first = records[idx[i]];
  GatheredGradient g;
  g.param = first.param;
  g.module = first.module;
  g.iteration = first.iteration;
  if (perReplica) {
    g.dp = first.dp;
    g.microbatch = first.microbatch;
  }
  g.fullShape = first.fullShape.empty() ? first.shape : first.fullShape;
  g.dtype = first.dtype;
  const ShardList shards = distinctShards(records, idx, i, j, g);
  g.shards = static_cast<int>(shards.size());
  int dim = shards.front()->partitionDim;
  describeShards(g, shards, dim);
  // Only when every shard carries a payload: below level full none does, and a vector of the
  // full tensor's size per gathered gradient was 7 of the 7.1 GB `check` took on a 10^7-event
  // run (clear() keeps the capacity).
  const bool payloads =
      std::all_of(shards.begin(), shards.end(),
                  [](const events::GradientRecord* s) { return !s->payload.empty(); });
  if (values && g.complete && payloads) assembleValues(g, shards, dim);
  return g;
}

// Gathers the records of `records` that `wanted` selects (gatherGradients' contract).
template <class Wanted>
std::vector<GatheredGradient> gatherSelected(const std::vector<events::GradientRecord>& records,
                                             bool values, Wanted wanted, bool perReplica = false) {
  // Group record indices by (iteration, param), and (dp, microbatch) when perReplica.
  std::vector<size_t> idx;
  for (size_t i = 0; i < records.size(); ++i) {
    if (wanted(records[i])) idx.push_back(i);
  }
  const auto replica = [perReplica](const events::GradientRecord& r) {
    return perReplica ? std::make_pair(r.dp, r.microbatch) : std::make_pair(0, 0);
  };
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const auto& x = records[a];
    const auto& y = records[b];
    const auto rx = replica(x), ry = replica(y);
    return std::tie(x.iteration, x.param, rx, x.partitionDim, x.partitionOffset, x.dp, x.tp) <
           std::tie(y.iteration, y.param, ry, y.partitionDim, y.partitionOffset, y.dp, y.tp);
  });
  std::vector<GatheredGradient> out;
  size_t i = 0;
  while (i < idx.size()) {
    const auto& first = records[idx[i]];
    size_t j = i;
    while (j < idx.size() && records[idx[j]].iteration == first.iteration &&
           records[idx[j]].param == first.param && replica(records[idx[j]]) == replica(first)) {
      ++j;
    }
    out.push_back(gatherOne(records, idx, i, j, values, perReplica));
    i = j;
  }
  return out;
}

}  // namespace

bool isReferenceTruth(const events::GradientRecord& r) {
  return r.phase == events::GradPhase::Reference && r.dtype == "float32";
}

std::vector<GatheredGradient> gatherGradients(const RunModel& run, events::GradPhase phase,
                                              bool values) {
  if (phase == events::GradPhase::Reference) {
    // The reference has its own records (RunModel::referenceGradients); GatheredGradient::records
    // then index that vector.  Its truth is its float32 records.
    return gatherSelected(run.referenceGradients, values, isReferenceTruth);
  }
  return gatherSelected(run.gradients, values,
                        [phase](const events::GradientRecord& r) { return r.phase == phase; });
}

std::vector<GatheredGradient> gatherAccumulated(const RunModel& run, bool values) {
  return gatherSelected(
      run.gradients, values,
      [](const events::GradientRecord& r) { return r.phase == events::GradPhase::Accumulated; },
      true);
}

std::vector<GatheredGradient> gatherReferenceSecondComputation(const RunModel& run, bool values) {
  return gatherSelected(run.referenceGradients, values, [](const events::GradientRecord& r) {
    return r.phase == events::GradPhase::Reference && !isReferenceTruth(r);
  });
}

}  // namespace stagescope::analysis
