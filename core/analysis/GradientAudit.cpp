#include "core/analysis/GradientAudit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/analysis/Values.h"

namespace stagescope::analysis {

namespace {

using events::GradientRecord;
using events::GradPhase;
using events::LossNormalisation;

// Two factors are the same cause when they agree to this relative difference (a uniform factor
// is measured from float32 sums: far below; distinct causes differ by at least x 1.5).
constexpr double kFactorMatch = 1e-3;

bool sameFactor(double a, double b) {
  return std::isfinite(a) && std::isfinite(b) && std::fabs(a - b) <= kFactorMatch * std::fabs(b);
}

std::string num(double v) {
  std::ostringstream o;
  o.precision(6);
  o << v;
  return o.str();
}

// What one (iteration, module) recorded about its reduction.
struct ModuleReduction {
  LossNormalisation normalisation = LossNormalisation::Unknown;
  int microbatches = -1;
  int64_t globalTokens = -1;
};

std::map<std::pair<int, std::string>, ModuleReduction> reductionsOf(const model::RunModel& run) {
  std::map<std::pair<int, std::string>, ModuleReduction> out;
  for (const auto& s : run.moduleSteps) {
    if (!s.hasReduction()) continue;
    auto& r = out[{s.iteration, s.module.str()}];
    r.normalisation = s.normalisation;  // one module config: every replica records the same
    r.microbatches = std::max(r.microbatches, s.microbatches);
    r.globalTokens = std::max(r.globalTokens, s.globalTokens);
  }
  return out;
}

// (iteration, module, param, partition offset, tp, pp): one parameter shard.
using ShardKey = std::tuple<int, std::string, std::string, int64_t, int, int>;

ShardKey shardOf(const GradientRecord& g) {
  return {g.iteration, g.module.str(), g.param.str(), g.partitionOffset, g.tp, g.pp};
}

// The element sum a record's statistics imply (mean over finite elements x numel): finite only
// when every element was.
double elementSum(const GradientRecord& g) {
  if (!g.hasStats || g.stats.nanCount || g.stats.infCount) return NAN;
  return g.stats.mean * static_cast<double>(g.stats.numel);
}

// The measured relation of one shard's reduced gradient to its expectation.
struct Measured {
  enum class Evidence { None, Values, Checksums, Sums, Norms } evidence = Evidence::None;
  bool equal = false;
  double factor = NAN;  // reduced / expected, when one uniform factor relates them
  double distance = 0;  // relative distance (values: L2, sums and norms: |f - 1|)
  std::string why;      // a reason it was not judged
};

struct Shard {
  std::map<int, const GradientRecord*> before;  // dp -> the last accumulated record
  const GradientRecord* reduced = nullptr;      // the lowest dp's copy
};

Measured measure(const Shard& s, double c, double floor, double bound) {
  Measured m;
  using E = Measured::Evidence;
  const GradientRecord& red = *s.reduced;
  std::vector<double> want, got, v;
  bool values = !red.payload.empty() && decodeValues(red.payload, red.dtype.str(), &got);
  if (values) {
    want.assign(got.size(), 0.0);
    for (const auto& [dp, acc] : s.before) {
      if (acc->payload.empty() || !decodeValues(acc->payload, acc->dtype.str(), &v) ||
          v.size() != want.size()) {
        values = false;
        break;
      }
      for (size_t i = 0; i < v.size(); ++i) want[i] += v[i];
    }
  }
  if (values) {
    for (auto& x : want) x *= c;
    double ab = 0, bb = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (!std::isfinite(want[i]) || !std::isfinite(got[i])) {
        m.why = "non-finite values";
        return m;
      }
      ab += got[i] * want[i];
      bb += want[i] * want[i];
    }
    m.evidence = E::Values;
    const ValueDistance d = valueDistance(got, want, floor);
    m.distance = d.rel;
    m.equal = d.rel <= bound;
    if (!m.equal && bb > 0) {
      // The least-squares factor, and whether it explains the values (a uniform factor).
      const double f = ab / bb;
      std::vector<double> scaled(want);
      for (auto& x : scaled) x *= f;
      if (valueDistance(got, scaled, floor).rel <= std::max(bound, kFactorMatch)) m.factor = f;
    }
    return m;
  }
  // One replica and c = 1 (a mean loss, the language model on one replica): the reduction must
  // leave the bytes as they were, so equal checksums are the verdict (a difference falls through
  // to the sums, which measure its factor).
  if (s.before.size() == 1 && c == 1.0) {
    const GradientRecord& acc = *s.before.begin()->second;
    if (acc.checksum != 0 && red.checksum != 0 && acc.checksum == red.checksum &&
        acc.dtype == red.dtype) {
      m.evidence = E::Checksums;
      m.equal = true;
      return m;
    }
  }
  double sumBefore = 0;
  bool sums = red.hasStats;
  for (const auto& [dp, acc] : s.before) {
    const double e = elementSum(*acc);
    sums = sums && std::isfinite(e);
    sumBefore += e;
  }
  const double sumAfter = elementSum(red);
  if (red.hasStats && (red.stats.nanCount || red.stats.infCount)) {
    m.why = "non-finite values";
    return m;
  }
  // A sum is evidence only when it is not cancellation noise: at least 1e-3 of what its
  // elements' magnitudes (the L2 norm) allow.
  if (sums && std::isfinite(sumAfter) && std::fabs(sumBefore * c) > 1e-3 * red.norm) {
    m.evidence = E::Sums;
    m.factor = sumAfter / (sumBefore * c);
    m.distance = std::fabs(m.factor - 1);
    m.equal = m.distance <= bound;
    return m;
  }
  if (s.before.size() == 1) {
    const GradientRecord& acc = *s.before.begin()->second;
    if (std::isfinite(acc.norm) && std::isfinite(red.norm) && acc.norm * c > 0) {
      m.evidence = E::Norms;
      m.factor = red.norm / (acc.norm * c);
      m.distance = std::fabs(m.factor - 1);
      m.equal = m.distance <= bound;
      return m;
    }
  }
  m.why = "no values (level full) and no usable element sums (level stats)";
  return m;
}

}  // namespace

bool auditedReduction(const model::RunModel& run, int iteration, const std::string& module) {
  return std::any_of(run.moduleSteps.begin(), run.moduleSteps.end(), [&](const auto& s) {
    return s.hasReduction() && s.iteration == iteration && s.module.str() == module;
  });
}

std::string GradientAuditReport::summary() const {
  std::ostringstream s;
  s << "gradient audit: " << judged << " reduced gradients judged against the sum over their "
    << "module's replicas / what the language model's loss normalisation implies";
  std::vector<std::string> how;
  if (byValues) how.push_back(std::to_string(byValues) + " by values");
  if (byChecksums)
    how.push_back(std::to_string(byChecksums) + " bitwise by checksums (one replica, c = 1)");
  if (bySums)
    how.push_back(std::to_string(bySums) + " by element sums (level stats records no values)");
  if (byNorms) how.push_back(std::to_string(byNorms) + " by norms (one replica, the fallback)");
  for (size_t i = 0; i < how.size(); ++i) s << (i ? ", " : " (") << how[i];
  if (!how.empty()) s << ")";
  if (notJudged) s << ", " << notJudged << " not judged";
  for (const auto& n : notes) s << "; " << n;
  return s.str();
}

namespace {

// (iteration, module)
using ModuleKey = std::pair<int, std::string>;

// A shard whose reduced gradient is not the expectation, with what was measured.
struct FailedShard {
  const Shard* shard;
  std::string param;
  Measured m;
};

// What auditGradients' steps share: the report being built, the reductions the run recorded, its
// language model (whose loss normalisation and dp set the expectation) and each module's dp, and
// per (iteration, module) the shards judged and those that failed.
struct Audit {
  const ToleranceRule& rule;
  GradientAuditReport& out;
  const std::map<ModuleKey, ModuleReduction> reductions;
  std::string llm{};
  std::map<std::string, int> dpOf{};
  int dL = 0;  // the language model's dp
  std::map<ModuleKey, std::vector<FailedShard>> failed{};
  std::map<ModuleKey, int> judgedOf{};
  std::set<std::string> noteSet{};
};

// The shards of every audited (iteration, module): each replica's last accumulated record and
// the lowest dp's reduced one.
std::map<ShardKey, Shard> auditedShards(const model::RunModel& run,
                                        const std::map<ModuleKey, ModuleReduction>& reductions) {
  std::map<ShardKey, Shard> shards;
  for (const auto& g : run.gradients) {
    if (!reductions.count({g.iteration, g.module.str()})) continue;
    auto& s = shards[shardOf(g)];
    if (g.phase == GradPhase::Accumulated) {
      auto& slot = s.before[g.dp];
      if (!slot || g.microbatch > slot->microbatch) slot = &g;
    } else if (g.phase == GradPhase::Reduced) {
      if (!s.reduced || g.dp < s.reduced->dp) s.reduced = &g;
    }
  }
  return shards;
}

// Per (iteration, module): the squared norm of its reduced gradients (the floor's scale).
std::map<ModuleKey, double> reducedNormSq(const std::map<ShardKey, Shard>& shards) {
  std::map<ModuleKey, double> normSq;
  for (const auto& [k, s] : shards)
    if (s.reduced && std::isfinite(s.reduced->norm))
      normSq[{std::get<0>(k), std::get<1>(k)}] += s.reduced->norm * s.reduced->norm;
  return normSq;
}

// One shard's reduced gradient against c x the sum of its replicas' accumulated ones (c: 1 / the
// language model's dp, or 1 / its global token count when its loss is per-token): counted by its
// evidence, kept when it fails; a shard not judged says why in the notes.
void judgeShard(Audit& audit, const ShardKey& key, const Shard& s,
                std::map<ModuleKey, double>& normSq) {
  GradientAuditReport& out = audit.out;
  const int iteration = std::get<0>(key);
  const std::string& module = std::get<1>(key);
  if (!s.reduced) return;  // accumulated only: not a reduction
  const auto lm = audit.reductions.find({iteration, audit.llm});
  if (lm == audit.reductions.end()) {
    ++out.notJudged;
    audit.noteSet.insert("iteration " + std::to_string(iteration) +
                         ": the language model's loss normalisation is not recorded");
    return;
  }
  double c = 1.0 / audit.dL;
  if (lm->second.normalisation == LossNormalisation::PerToken) {
    if (lm->second.globalTokens <= 0) {
      ++out.notJudged;
      audit.noteSet.insert("iteration " + std::to_string(iteration) + ": " + audit.llm +
                           "'s loss is per-token but its global token count is not recorded");
      return;
    }
    c = 1.0 / static_cast<double>(lm->second.globalTokens);
  }
  const int dM = audit.dpOf.count(module) ? audit.dpOf[module] : 1;
  if (static_cast<int>(s.before.size()) != dM) {
    ++out.notJudged;
    audit.noteSet.insert(module + ": " + std::to_string(s.before.size()) + " of its " +
                         std::to_string(dM) +
                         " replicas recorded the gradient before the reduction");
    return;
  }
  const double floor = 1e-3 * std::sqrt(normSq[{iteration, module}]);
  const Measured m = measure(s, c, floor, audit.rule.bound(ValueKind::Gradient, iteration));
  using E = Measured::Evidence;
  if (m.evidence == E::None) {
    ++out.notJudged;
    audit.noteSet.insert(module + " iteration " + std::to_string(iteration) + ": " + m.why);
    return;
  }
  ++out.judged;
  ++audit.judgedOf[{iteration, module}];
  (m.evidence == E::Values      ? out.byValues
   : m.evidence == E::Checksums ? out.byChecksums
   : m.evidence == E::Sums      ? out.bySums
                                : out.byNorms)++;
  if (!m.equal) audit.failed[{iteration, module}].push_back({&s, std::get<2>(key), m});
}

// The cause of uniform factor `f` by which `module` (dp dM, normalisation `own`) differs from the
// expectation, told after "cause: ": the modules' normalisations differ, it averaged over its own
// dp, it was never divided by the global token count, or nothing recorded explains it.
void explainUniformFactor(const Audit& audit, const std::string& module, int dM,
                          const ModuleReduction& own, const ModuleReduction& lang, double f,
                          AuditFinding& a, std::ostream& o) {
  const std::string& llm = audit.llm;
  const int dL = audit.dL;
  const bool ownMean = own.normalisation == LossNormalisation::Mean;
  if (own.normalisation != lang.normalisation) {
    a.cause = "normalisation";
    const double predicted = ownMean ? 1.0 / dM : static_cast<double>(dM);
    o << "the modules normalise the loss differently: " << module << " records "
      << toString(own.normalisation) << " (calculate_per_token_loss "
      << (ownMean ? "off: its DDP averages over its dp " : "on: its DDP sums over its dp ") << dM
      << "), " << llm << " " << toString(lang.normalisation) << "; ";
    if (sameFactor(f, predicted))
      o << "a correction that assumes " << module << " reduced like " << llm << " leaves x "
        << num(predicted) << " (Megatron-Bridge PR #5555: correct each module by its own "
        << "normalisation)";
    else
      o << "the factor is not the x " << num(predicted)
        << " a correction assuming one normalisation gives";
  } else if (ownMean && sameFactor(f, static_cast<double>(dL) / dM)) {
    a.cause = "own_dp";
    o << module << " averaged over its own dp " << dM << " instead of " << llm << "'s dp " << dL
      << ": the factor d_L/d_E = " << dL << "/" << dM
      << " (docs/schedule.md §7.1; Megatron-Bridge PR #4066: scale by d_E/d_L)";
  } else if (!ownMean && lang.globalTokens > 0 &&
             sameFactor(f, static_cast<double>(lang.globalTokens))) {
    a.cause = "tokens";
    o << module << " was never divided by the global token count " << lang.globalTokens
      << " (a per-token loss: its DDP sums, the finalizer must divide)";
  } else {
    a.cause = "unexplained";
    o << "a factor nothing recorded explains (both modules " << toString(own.normalisation)
      << "; d_L/d_E = " << dL << "/" << dM;
    if (lang.globalTokens > 0) o << ", global tokens " << lang.globalTokens;
    o << ")";
  }
}

// The one finding of an (iteration, module) whose reduced gradients failed (`list`): a uniform
// factor with its cause, else per parameter.
AuditFinding auditFinding(Audit& audit, const ModuleKey& im, const std::vector<FailedShard>& list) {
  const auto& [iteration, module] = im;
  const std::string& llm = audit.llm;
  const ModuleReduction& own = audit.reductions.at(im);
  const ModuleReduction& lang = audit.reductions.at({iteration, llm});
  const int dM = audit.dpOf.count(module) ? audit.dpOf[module] : 1;
  const double f = list.front().m.factor;
  const bool uniform = static_cast<int>(list.size()) == audit.judgedOf[im] &&
                       std::all_of(list.begin(), list.end(),
                                   [&](const FailedShard& x) { return sameFactor(x.m.factor, f); });
  const char* evidence = list.front().m.evidence == Measured::Evidence::Values ? "by values"
                         : list.front().m.evidence == Measured::Evidence::Sums
                             ? "by element sums: level stats records no values"
                             : "by norms: the fallback";
  AuditFinding a;
  a.iteration = iteration;
  a.module = module;
  a.rank = list.front().shard->reduced->rank;
  a.factor = uniform ? f : NAN;
  std::ostringstream o;
  o << module << " iteration " << iteration << ": ";
  const std::string rule =
      lang.normalisation == LossNormalisation::PerToken
          ? "the sum over its " + std::to_string(dM) + " replicas / the global token count " +
                std::to_string(lang.globalTokens) + " (" + llm + "'s loss is per-token)"
          : "the sum over its " + std::to_string(dM) + " replicas / " + llm + "'s dp " +
                std::to_string(audit.dL) + " (" + llm + "'s loss is a mean)";
  if (!uniform) {
    a.cause = "unexplained";
    o << list.size() << " of " << audit.judgedOf[im] << " reduced gradients differ from " << rule
      << " and no uniform factor explains them (first: " << list.front().param << ", relative "
      << num(list.front().m.distance) << ", " << evidence
      << "): a cause other than the normalisation or the data-parallel factor";
  } else {
    o << "the reduced gradients are " << num(f) << " x " << rule << " in all " << list.size()
      << " parameters (" << evidence << "); cause: ";
    explainUniformFactor(audit, module, dM, own, lang, f, a, o);
  }
  a.sentence = o.str();
  return a;
}

}  // namespace

GradientAuditReport auditGradients(const model::RunModel& run, const ToleranceRule& rule) {
  GradientAuditReport out;
  Audit audit{rule, out, reductionsOf(run)};
  if (audit.reductions.empty()) return out;
  for (const auto& m : run.info.modules) {
    audit.dpOf[m.name] = std::max(m.dp, 1);
    if (m.isLlm()) audit.llm = m.name;
  }
  if (audit.llm.empty()) {
    out.notes.push_back("not judged: the run declares no language model (declare_layout)");
    return out;
  }
  audit.dL = audit.dpOf[audit.llm];
  const std::map<ShardKey, Shard> shards = auditedShards(run, audit.reductions);
  // Per (iteration, module): the reduced norm (the floor) and what was measured per shard.
  std::map<ModuleKey, double> normSq = reducedNormSq(shards);
  for (const auto& [key, s] : shards) judgeShard(audit, key, s, normSq);
  out.notes.assign(audit.noteSet.begin(), audit.noteSet.end());
  // One finding per (iteration, module): a uniform factor with its cause, else per parameter.
  for (const auto& [im, list] : audit.failed) out.findings.push_back(auditFinding(audit, im, list));
  return out;
}

}  // namespace stagescope::analysis
