#include "core/analysis/Accumulation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "core/analysis/Format.h"
#include "core/analysis/GradientAudit.h"
#include "core/analysis/Values.h"

namespace stagescope::analysis {

namespace {

using events::GradientRecord;
using events::GradPhase;

// (iteration, module, param, partition dim, partition offset, tp, pp)
using ShardKey = std::tuple<int, std::string, std::string, int, int64_t, int, int>;

ShardKey shardOf(const GradientRecord& g) {
  return {g.iteration,       g.module.str(), g.param.str(), g.partitionDim,
          g.partitionOffset, g.tp,           g.pp};
}

}  // namespace

std::string AccumulationReport::summary() const {
  std::ostringstream s;
  s << judged << " reduced gradients equal to what their replicas accumulated (sum over DP of "
    << "the last microbatch's accumulated gradient / llm dp; " << bitwise << " bitwise by "
    << "checksums";
  if (judged > bitwise) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2g", worst);
    s << ", the worst by values at " << buf << " of its bound";
  }
  s << ")";
  if (unjudged)
    s << ", " << unjudged
      << " not judged (a sum over replicas needs values, level full; or a replica's record is "
         "missing)";
  return s.str();
}

AccumulationReport judgeAccumulation(const model::RunModel& run, const ToleranceRule& rule) {
  AccumulationReport out;
  int llmDp = 1;
  std::map<std::string, int> moduleDp;
  for (const auto& m : run.info.modules) {
    moduleDp[m.name] = std::max(m.dp, 1);
    if (m.isLlm()) llmDp = std::max(m.dp, 1);
  }
  // The last microbatch's accumulated record of each replica, and the first (lowest dp) copy of
  // each reduced shard.
  std::map<ShardKey, std::map<int, const GradientRecord*>> last;  // shard -> dp -> record
  std::map<ShardKey, const GradientRecord*> reduced;
  std::map<int, double> modelNormSq;
  for (const auto& g : run.gradients) {
    if (g.phase == GradPhase::Accumulated) {
      auto& slot = last[shardOf(g)][g.dp];
      if (!slot || g.microbatch > slot->microbatch) slot = &g;
    } else if (g.phase == GradPhase::Reduced) {
      auto& slot = reduced[shardOf(g)];
      if (!slot || g.dp < slot->dp) slot = &g;
    }
  }
  // The model-norm floor, from the distinct reduced shards (the TP copies of a replicated
  // parameter counted once).
  {
    std::map<std::tuple<int, std::string, int, int64_t>, double> shardNorm;
    for (const auto& [k, g] : reduced)
      shardNorm[{std::get<0>(k), std::get<2>(k), std::get<3>(k), std::get<4>(k)}] = g->norm;
    for (const auto& [k, n] : shardNorm)
      if (std::isfinite(n)) modelNormSq[std::get<0>(k)] += n * n;
  }
  std::vector<double> sum, v, want;
  for (const auto& [key, red] : reduced) {
    // A captured job that recorded its loss normalisation: the gradient audit judges it.
    if (auditedReduction(run, std::get<0>(key), std::get<1>(key))) continue;
    const auto found = last.find(key);
    if (found == last.end()) continue;  // nothing accumulated (forward-only, filtered out)
    const auto& replicas = found->second;
    const auto dpIt = moduleDp.find(red->module.str());
    const int dp = dpIt == moduleDp.end() ? 1 : dpIt->second;
    if (static_cast<int>(replicas.size()) != dp) {
      ++out.unjudged;
      continue;
    }
    const int iteration = std::get<0>(key);
    const double bound = rule.bound(ValueKind::Gradient, iteration);
    AccumulationMismatch m;
    m.iteration = iteration;
    m.param = red->param.str();
    m.module = red->module.str();
    m.tp = red->tp;
    m.pp = red->pp;
    m.partitionOffset = red->partitionOffset;
    m.rank = red->rank;
    m.bound = bound;
    bool values = !red->payload.empty() && decodeValues(red->payload, red->dtype.str(), &want);
    if (values) {
      sum.assign(want.size(), 0.0);
      for (const auto& [d, acc] : replicas) {
        if (acc->payload.empty() || !decodeValues(acc->payload, acc->dtype.str(), &v) ||
            v.size() != sum.size()) {
          values = false;
          break;
        }
        for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
      }
    }
    std::ostringstream s;
    s << "reduced gradient " << m.param << " iteration " << iteration << " (" << m.module << " tp"
      << m.tp << " pp" << m.pp;
    if (red->partitionDim >= 0) s << ", shard offset " << m.partitionOffset;
    s << ", rank " << m.rank << ") is not what its " << dp
      << (dp == 1 ? " replica" : " DP replicas") << " accumulated (sum of the last microbatch's "
      << "accumulated gradient / llm dp " << llmDp << "): ";
    if (values) {
      for (auto& x : sum) x /= llmDp;
      const double floor = rule.floorRel * std::sqrt(modelNormSq[iteration]);
      const ValueDistance d = valueDistance(sum, want, floor);
      ++out.judged;
      m.distance = d.rel;
      if (bound > 0) out.worst = std::max(out.worst, d.rel / bound);
      if (!(d.rel <= bound)) {
        s << "relative L2 " << d.rel << " > " << bound;
        if (d.worst >= 0 && static_cast<size_t>(d.worst) < sum.size())
          s << " (element " << d.worst << ": accumulated " << sum[static_cast<size_t>(d.worst)]
            << ", reduced " << want[static_cast<size_t>(d.worst)] << ")";
        m.sentence = s.str();
        out.mismatches.push_back(std::move(m));
      }
      continue;
    }
    const GradientRecord* acc = replicas.begin()->second;
    if (dp == 1 && llmDp == 1 && red->checksum != 0 && acc->checksum != 0) {
      ++out.judged;
      ++out.bitwise;
      if (red->checksum != acc->checksum || red->dtype != acc->dtype) {
        m.distance = INFINITY;
        s << "checksum " << formatChecksum(acc->checksum) << " (accumulated, microbatch "
          << acc->microbatch << ") vs " << formatChecksum(red->checksum)
          << " (reduced); one replica: they must be bitwise equal";
        m.sentence = s.str();
        out.mismatches.push_back(std::move(m));
      }
      continue;
    }
    ++out.unjudged;
  }
  return out;
}

}  // namespace stagescope::analysis
