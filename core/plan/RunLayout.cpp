#include "core/plan/RunLayout.h"

namespace stagescope::plan {

std::vector<events::ModuleInfo> moduleInfos(const RunConfig& cfg) {
  std::vector<events::ModuleInfo> out;
  for (const auto& m : cfg.modules) {
    events::ModuleInfo mi;
    mi.name = m.name;
    mi.kind = events::toString(m.kind);
    mi.tp = m.tp;
    mi.cp = m.cp;
    mi.pp = m.pp;
    mi.dp = m.dp;
    mi.offset = m.offset;
    mi.layers = m.layers;
    if (m.isEncoder()) mi.downstream = {cfg.llm().name};
    out.push_back(std::move(mi));
  }
  return out;
}

events::RunSettings runSettings(const RunConfig& cfg) {
  events::RunSettings s;
  s.recorded = true;
  s.seed = cfg.seed;
  s.microBatchSize = cfg.microBatchSize;
  s.dtype = cfg.dtype;
  s.forwardOnly = cfg.forwardOnly;
  s.lossScale = cfg.lossScale;
  const OptimizerConfig& o = cfg.optimizer;
  s.optimizer = {o.kind, o.lr, o.momentum, o.beta1, o.beta2, o.eps, o.weightDecay};
  for (const auto& m : cfg.modules) {
    events::ModuleSettings ms;
    ms.name = m.name;
    ms.kind = m.kind;
    ms.dp = m.dp;
    if (m.isLlm()) {
      ms.textLen = m.textLen;
      ms.vocab = m.vocab;
    } else {
      ms.patches = m.patches;
      ms.patchDim = m.patchDim;
    }
    s.modules.push_back(std::move(ms));
  }
  return s;
}

std::vector<events::RankInfo> rankInfos(const RankPlan& rank, const Plan& plan) {
  std::vector<events::RankInfo> out;
  for (const RankStage& s : rank.stages) {
    events::RankInfo info;
    info.rank = rank.rank;
    info.module = s.module;
    info.tp = s.tp;
    info.cp = s.cp;
    info.pp = s.pp;
    info.dp = s.dp;
    info.globalStage = rank.globalStage;
    info.totalStages = plan.totalStages;
    info.warmup = rank.warmup;
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace stagescope::plan
