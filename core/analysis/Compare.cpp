#include "core/analysis/Compare.h"
#include "core/analysis/Comparability.h"
#include "core/analysis/GradientRatio.h"
#include "core/analysis/PlanConformance.h"
#include "core/analysis/Replicas.h"
#include "core/events/CapturedLayout.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

namespace stagescope::analysis {

using events::Direction;
using events::Side;
using events::TransferRecord;
using model::RunModel;

const char* toString(Verdict v) {
  switch (v) {
    case Verdict::Identical:
      return "identical";
    case Verdict::WithinTolerance:
      return "equal within tolerance";
    case Verdict::Diverged:
      return "diverged";
    case Verdict::Incomplete:
      return "incomplete";
  }
  return "?";
}

namespace {

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur)) out.push_back(cur);
  return out;
}

}  // namespace

std::vector<ConfigDiffLine> diffLines(const std::string& a, const std::string& b) {
  auto x = splitLines(a), y = splitLines(b);
  std::vector<ConfigDiffLine> out;
  size_t pre = 0;
  while (pre < x.size() && pre < y.size() && x[pre] == y[pre]) ++pre;
  size_t suf = 0;
  while (suf < x.size() - pre && suf < y.size() - pre &&
         x[x.size() - 1 - suf] == y[y.size() - 1 - suf]) {
    ++suf;
  }
  for (size_t i = 0; i < pre; ++i) out.push_back({' ', x[i]});
  size_t n = x.size() - pre - suf, m = y.size() - pre - suf;
  if (n * m <= 4'000'000) {
    // LCS table over the middle part.
    std::vector<std::vector<uint32_t>> L(n + 1, std::vector<uint32_t>(m + 1, 0));
    for (size_t i = n; i-- > 0;) {
      for (size_t j = m; j-- > 0;) {
        L[i][j] =
            x[pre + i] == y[pre + j] ? L[i + 1][j + 1] + 1 : std::max(L[i + 1][j], L[i][j + 1]);
      }
    }
    size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && x[pre + i] == y[pre + j]) {
        out.push_back({' ', x[pre + i]});
        ++i;
        ++j;
      } else if (i < n && (j == m || L[i + 1][j] >= L[i][j + 1])) {
        out.push_back({'-', x[pre + i++]});
      } else {
        out.push_back({'+', y[pre + j++]});
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) out.push_back({'-', x[pre + i]});
    for (size_t j = 0; j < m; ++j) out.push_back({'+', y[pre + j]});
  }
  for (size_t i = x.size() - suf; i < x.size(); ++i) out.push_back({' ', x[i]});
  return out;
}

namespace {

RunSummary summarize(const RunModel& run, const std::string& label) {
  RunSummary s;
  s.label = label;
  s.path = run.path;
  s.runId = run.info.runId;
  s.name = s.runId;
  if (run.info.captured() && !run.path.empty()) {
    std::string file = run.path.substr(run.path.find_last_of('/') + 1);
    if (const size_t dot = file.rfind(".db"); dot != std::string::npos && dot + 3 == file.size())
      file.resize(dot);
    if (!file.empty()) s.name = file;
  }
  s.status = toString(run.info.status);
  s.statusReason = run.info.statusReason;
  s.configHash = run.info.configHash;
  s.level = toString(run.info.level);
  s.worldSize = run.info.worldSize;
  s.iterations = run.info.iterations;
  s.microbatches = run.info.microbatches;
  for (const auto& m : run.info.modules) {
    if (!s.layout.empty()) s.layout += "; ";
    s.layout += m.name + " tp" + std::to_string(m.tp) + " pp" + std::to_string(m.pp) + " dp" +
                std::to_string(m.dp);
    if (m.cp > 1) s.layout += " cp" + std::to_string(m.cp);
  }
  for (const auto& a : run.actions) s.events += a.size();
  s.events +=
      run.transfers.size() + run.gradients.size() + run.gradientsNotLoaded + run.losses.size();
  s.time = timeBreakdown(run);
  return s;
}

std::string dtypeOrFloat32(const RunModel& run) {
  const std::string d = computeDtypeOf(run);
  return d.empty() ? "float32" : d;
}

// ---- from the alignment ---------------------------------------------------------------------
void fillLosses(const RunModel& a, const RunModel& b, const CompareOptions& opts, Comparison& c) {
  std::map<int, std::pair<double, int>> sa, sb;  // iteration -> (sum, n)
  int iterations = 0;
  for (const auto& it : c.alignment.items) {
    if (it.kind != ItemKind::Loss) continue;
    if (it.microbatch < 0) {
      // The iteration's mean loss: judged and counted, not a row of the per-microbatch table
      // (nor part of its iteration means).
      if (it.a >= 0 && it.b >= 0) {
        ++c.lossesCompared;
        // "differ" is beyond the tolerance only, as for every other item.
        if (it.state == ItemState::Differ) ++c.lossesDiffering;
        if (it.state == ItemState::WithinTolerance) ++c.lossesWithinTolerance;
        if (!std::isnan(it.distance)) c.maxLossRelDiff = std::max(c.maxLossRelDiff, it.distance);
      } else {
        ++c.lossesOnlyOne;
      }
      continue;
    }
    LossRow r;
    r.iteration = it.iteration;
    r.microbatch = it.microbatch;
    r.dp = -1;
    r.hasA = it.a >= 0;
    r.hasB = it.b >= 0;
    if (r.hasA) r.a = it.valueA;
    if (r.hasB) r.b = it.valueB;
    iterations = std::max(iterations, it.iteration + 1);
    if (r.hasA) sa[it.iteration].first += r.a, sa[it.iteration].second++;
    if (r.hasB) sb[it.iteration].first += r.b, sb[it.iteration].second++;
    if (r.hasA && r.hasB) {
      ++c.lossesCompared;
      r.diff = r.b - r.a;
      r.relDiff = it.distance;
      if (it.state == ItemState::Differ) ++c.lossesDiffering;
      if (it.state == ItemState::WithinTolerance) ++c.lossesWithinTolerance;
      if (!std::isnan(it.distance)) c.maxLossRelDiff = std::max(c.maxLossRelDiff, it.distance);
    } else {
      ++c.lossesOnlyOne;
    }
    c.losses.push_back(r);
  }
  std::sort(c.losses.begin(), c.losses.end(), [](const LossRow& x, const LossRow& y) {
    return std::tie(x.iteration, x.microbatch) < std::tie(y.iteration, y.microbatch);
  });
  if (c.losses.size() > opts.maxLossRows) c.losses.resize(opts.maxLossRows);
  for (int i = 0; i < iterations; ++i) {
    auto mean = [&](std::map<int, std::pair<double, int>>& m) {
      auto f = m.find(i);
      return f == m.end() || f->second.second == 0 ? NAN : f->second.first / f->second.second;
    };
    auto count = [&](std::map<int, std::pair<double, int>>& m) {
      auto f = m.find(i);
      return f == m.end() ? 0 : f->second.second;
    };
    c.iterLossA.push_back(mean(sa));
    c.iterLossB.push_back(mean(sb));
    c.iterLossCountA.push_back(count(sa));
    c.iterLossCountB.push_back(count(sb));
  }
  (void)a;
  (void)b;
}

// One sentence: the captured run of the two against the plan the other (an engine run) executed.
std::string captureAgainstPlan(const RunModel& a, const RunModel& b, const CompareOptions& opts) {
  const bool capA = a.info.captured();
  const bool capB = b.info.captured();
  if (capA == capB) return "";
  const RunModel& captured = capA ? a : b;
  const RunModel& engine = capA ? b : a;
  const std::string& capLabel = capA ? opts.labelA : opts.labelB;
  const std::string& engLabel = capA ? opts.labelB : opts.labelA;
  const Conformance k = judgeAgainstPlan(captured, engine.info.configText,
                                         engLabel + "'s plan (what its engine ran)");
  std::ostringstream s;
  s << "the captured job " << capLabel << " against " << k.layout << ": ";
  if (!k.judged) return s.str() + "not judged: " + k.notJudged;
  const int following = static_cast<int>(k.ranks.size()) - k.deviating() - k.stopped();
  s << following << " of " << k.ranks.size() << " ranks follow it to the end";
  if (k.deviating()) s << ", " << k.deviating() << " deviate";
  if (k.stopped()) s << ", " << k.stopped() << " stopped early";
  for (const auto& v : k.ranks) {
    if (v.state != RankConformance::State::Conforms) {
      s << "; first: rank " << v.rank << " (" << v.holds << ") " << v.sentence;
      break;
    }
  }
  return s.str();
}

void fillGradients(const RunModel& a, const RunModel& b, const CompareOptions& opts,
                   Comparison& c) {
  std::vector<GradRow> rows;
  int iterations = 0, lastCommon = -1;
  for (const auto& it : c.alignment.items) {
    // The reduced gradients: initial parameters and accumulated gradients are judged in the
    // alignment (and counted in the evidence line), not rows of these tables.
    if (it.kind != ItemKind::Gradient || it.phase != events::GradPhase::Reduced) continue;
    GradRow r;
    r.param = it.param;
    r.iteration = it.iteration;
    r.hasA = it.a >= 0;
    r.hasB = it.b >= 0;
    if (r.hasA) r.normA = it.valueA;
    if (r.hasB) r.normB = it.valueB;
    r.how = toString(it.evidence);
    r.state = toString(it.state);
    r.tolerance = it.tolerance;
    iterations = std::max(iterations, it.iteration + 1);
    if (r.hasA && r.hasB) {
      ++c.gradsCompared;
      lastCommon = std::max(lastCommon, it.iteration);
      r.bitwiseEqual = it.state == ItemState::Identical;
      r.relDiff = it.distance;
      if (it.state == ItemState::Differ) ++c.gradsDiffering;
      if (it.state == ItemState::WithinTolerance) ++c.gradsWithinTolerance;
      if (!std::isnan(r.relDiff)) c.maxGradRelDiff = std::max(c.maxGradRelDiff, r.relDiff);
    } else {
      ++c.gradsOnlyOne;
    }
    rows.push_back(std::move(r));
  }
  std::vector<double> ta(iterations, 0), tb(iterations, 0);
  for (const auto& r : rows) {
    if (r.hasA && r.iteration >= 0) ta[r.iteration] += r.normA * r.normA;
    if (r.hasB && r.iteration >= 0) tb[r.iteration] += r.normB * r.normB;
  }
  for (int k = 0; k < iterations; ++k) {
    c.totalNormA.push_back(std::sqrt(ta[k]));
    c.totalNormB.push_back(std::sqrt(tb[k]));
  }
  std::sort(rows.begin(), rows.end(), [](const GradRow& x, const GradRow& y) {
    return std::tie(x.iteration, x.param) < std::tie(y.iteration, y.param);
  });
  for (const auto& r : rows) {
    if (r.iteration == lastCommon && r.hasA && r.hasB) c.gradLast.push_back(r);
  }
  std::vector<const GradRow*> diff;
  for (const auto& r : rows) {
    if (!(r.hasA && r.hasB) || !r.bitwiseEqual) diff.push_back(&r);
  }
  auto score = [](const GradRow* r) -> double {
    if (!(r->hasA && r->hasB)) return INFINITY;
    return std::isnan(r->relDiff) ? INFINITY : r->relDiff;
  };
  std::stable_sort(diff.begin(), diff.end(),
                   [&](const GradRow* p, const GradRow* q) { return score(p) > score(q); });
  std::set<std::string> seen;  // one row per parameter (its worst iteration)
  for (const auto* r : diff) {
    if (c.gradTop.size() >= opts.topGradients) break;
    if (seen.insert(r->param).second) c.gradTop.push_back(*r);
  }
  for (auto& u : uniformGradientRatios(rows, a, b))
    c.gradientRatios.push_back(std::move(u.sentence));
}

TransferSideInfo sideInfo(const RunModel& run, int64_t index) {
  TransferSideInfo s;
  if (index < 0) return s;
  const auto& t = run.transfers[index];
  s.present = true;
  s.index = index;
  s.srcRank = t.srcRank;
  s.dstRank = t.dstRank;
  s.checksums = {t.checksum};
  s.shape = t.shape;
  s.dtype = t.dtype;
  s.hasStats = t.hasStats;
  s.stats = t.stats;
  return s;
}

void fillTransfers(const RunModel& a, const RunModel& b, Comparison& c) {
  c.transfersComparable =
      a.info.level >= events::RecordLevel::Stats && b.info.level >= events::RecordLevel::Stats;
  for (const auto& it : c.alignment.items) {
    if (it.kind != ItemKind::Transfer) continue;
    switch (it.state) {
      case ItemState::OnlyA:
        ++c.transfersOnlyA;
        break;
      case ItemState::OnlyB:
        ++c.transfersOnlyB;
        break;
      case ItemState::NotAligned:
      case ItemState::Unjudged:
        break;
      default:
        ++c.transfersCompared;
        if (it.state == ItemState::Differ) ++c.transfersDiffering;
        if (it.state == ItemState::WithinTolerance) ++c.transfersWithinTolerance;
    }
    if (it.state == ItemState::Differ && !c.firstDivergent) {
      TransferDiff d;
      d.edge = it.edge;
      d.direction = it.direction;
      d.iteration = it.iteration;
      d.microbatch = it.microbatch;
      d.srcDp = it.a >= 0 ? a.transfers[it.a].srcRank : -1;
      const auto* r = it.a >= 0 ? findRank(a, a.transfers[it.a].srcRank,
                                           model::edgeModules(a.transfers[it.a]).first)
                                : nullptr;
      if (r) {
        d.srcDp = r->dp;
      }
      d.a = sideInfo(a, it.a);
      d.b = sideInfo(b, it.b);
      d.reason = it.sidesDisagreeIn ? std::string("sender and receiver disagree in ") +
                                          (it.sidesDisagreeIn == 3   ? "both runs"
                                           : it.sidesDisagreeIn == 1 ? c.a.label
                                                                     : c.b.label)
                                    : std::string(toString(it.evidence));
      d.relDiff = it.distance;
      c.firstDivergent = std::move(d);
    }
  }
}

std::string fmtNum(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

void decideVerdict(const RunModel& a, const RunModel& b, const CompareOptions& opts,
                   Comparison& c) {
  const Alignment& al = c.alignment;
  // Evidence summary.
  {
    std::ostringstream e;
    const char* kinds[] = {"messages", "losses", "gradients", "input samples"};
    for (size_t k = 0; k < kItemKinds; ++k) {
      if (k) e << "; ";
      e << kinds[k] << ": " << al.compared[k] << " compared";
    }
    e << " (by values " << al.byEvidence[0] << ", by checksums " << al.byEvidence[1]
      << ", by norms (fallback) " << al.byEvidence[2] << ")";
    // What the losses and gradients above include besides microbatch losses and reduced
    // gradients (Align.h).
    e << "; of them iteration-mean losses " << al.meanLossesCompared << ", initial parameters "
      << al.initialCompared << " (" << al.initialBitwise << " bitwise"
      << (al.sameLayout ? ", the same layout: bitwise required" : "") << "), accumulated "
      << "gradients " << al.accumulatedCompared;
    if (al.accumulatedNotAligned)
      e << "; " << al.accumulatedNotAligned
        << " accumulated gradients not aligned (a module's dp or the llm's differs)";
    const auto& na = al.notAlignedByKind;
    if (na[0]) e << "; " << na[0] << " messages not aligned (the layouts differ)";
    if (na[1])
      e << "; " << na[1]
        << " microbatch losses not aligned (the llm's replicas hold other samples per microbatch)";
    if (!al.inputsNotCompared.empty()) e << "; inputs not compared: " << al.inputsNotCompared;
    if (!al.globalBatchEvidence.empty())
      e << "; same global batch decided by " << al.globalBatchEvidence;
    if (al.unjudged) e << "; " << al.unjudged << " items carry nothing to compare";
    c.evidence = e.str();
  }
  auto coverageLines = [&](const RunCoverage& cov, const std::string& label) {
    if (cov.complete()) return;
    for (const auto& m : cov.missing) c.missing.push_back(label + ": " + m);
    if (cov.missing.empty()) c.missing.push_back(label + ": " + cov.summary());
  };
  coverageLines(c.coverageA, opts.labelA);
  coverageLines(c.coverageB, opts.labelB);
  if (al.onlyA || al.onlyB) {
    std::ostringstream m;
    m << al.onlyA << " aligned items only in " << opts.labelA << ", " << al.onlyB << " only in "
      << opts.labelB;
    for (const auto& it : al.items) {
      if (it.state == ItemState::OnlyA || it.state == ItemState::OnlyB) {
        m << " (first: " << it.key << ", " << toString(it.state) << ")";
        break;
      }
    }
    if (opts.filterA.any()) m << "; " << opts.labelA << " " << opts.filterA.describe();
    if (opts.filterB.any()) m << "; " << opts.labelB << " " << opts.filterB.describe();
    c.missing.push_back(m.str());
  }
  const size_t compared = al.compared[0] + al.compared[1] + al.compared[2] + al.compared[3];
  if (compared == 0) c.missing.push_back("nothing could be compared (no aligned records)");
  if (al.first()) {
    c.first = *al.first();
    c.firstText = describeItem(*c.first);
  }
  std::ostringstream why;
  if (a.info.captured() != b.info.captured()) {
    // Whatever aligns by name, the values come from two different models: no evidence either
    // way, so neither equal nor diverged.
    c.verdict = Verdict::Incomplete;
    why << "cannot call the runs equal: their numbers are not comparable (a captured job trains "
           "its own model, stagescope's engine the model of docs/model.md); the captured job's "
           "schedule is judged against the engine run's plan instead";
  } else if (!al.sameGlobalBatch) {
    c.verdict = Verdict::Diverged;
    why << "the runs do not train on the same global batch (" << al.globalBatchNote
        << "): their numbers are not comparable";
  } else if (!c.missing.empty()) {
    c.verdict = Verdict::Incomplete;
    why << "cannot call the runs equal: ";
    for (size_t i = 0; i < c.missing.size() && i < 4; ++i) why << (i ? "; " : "") << c.missing[i];
    if (c.missing.size() > 4) why << "; ... " << c.missing.size() - 4 << " more";
    if (c.first) why << ". Among what both recorded, the first divergence: " << c.firstText;
  } else if (al.differ == 0 && (!c.replicasA.empty() || !c.replicasB.empty())) {
    // Each aligned item was judged on one copy; another copy of a tensor or loss in one run
    // differs from it (Replicas.h), so that run differs from the other there.
    c.verdict = Verdict::Diverged;
    const bool inA = !c.replicasA.empty();
    why << "the copies of one tensor or loss in run " << (inA ? opts.labelA : opts.labelB)
        << " disagree, first: " << (inA ? c.replicasA : c.replicasB).front();
  } else if (al.differ > 0) {
    c.verdict = Verdict::Diverged;
    why << al.differ << " of " << compared << " aligned items differ beyond the tolerance; first "
        << "(causal order): " << c.firstText;
  } else if (al.withinTolerance > 0) {
    c.verdict = Verdict::WithinTolerance;
    why << al.identical << " items bitwise identical, " << al.withinTolerance
        << " within tolerance (max relative L2: messages " << fmtNum(al.maxDistance[0])
        << ", losses " << fmtNum(al.maxDistance[1]) << ", reduced gradients "
        << fmtNum(c.maxGradRelDiff);
    // The same maxima as every count line (reduced gradients: c.maxGradRelDiff); the initial
    // and accumulated gradients, counted in the evidence line, only where they reach further.
    if (al.maxDistance[2] > c.maxGradRelDiff)
      why << " (" << fmtNum(al.maxDistance[2]) << " with the initial and accumulated)";
    why << ", input samples (element-wise) " << fmtNum(al.maxDistance[3]) << ")";
  } else {
    c.verdict = Verdict::Identical;
    why << "all " << c.transfersCompared << " messages, " << c.lossesCompared << " losses, "
        << c.gradsCompared << " parameter gradients, " << al.initialCompared
        << " initial parameters, " << al.accumulatedCompared << " accumulated gradients and "
        << al.compared[3] << " input samples are bitwise equal";
  }
  c.verdictReason = why.str();
  (void)a;
  (void)b;
}

}  // namespace

Comparison compareRuns(const RunModel& a, const RunModel& b, const CompareOptions& opts) {
  Comparison c;
  c.a = summarize(a, opts.labelA);
  c.b = summarize(b, opts.labelB);
  c.configDiff = diffLines(a.info.configText, b.info.configText);
  c.configEqual = std::all_of(c.configDiff.begin(), c.configDiff.end(),
                              [](const ConfigDiffLine& l) { return l.op == ' '; });
  AlignOptions ao;
  ao.tolerance = toleranceFor(dtypeOrFloat32(a), opts.tolerance);
  if (isLowPrecision(dtypeOrFloat32(b))) ao.tolerance.lowPrecision = true;
  c.toleranceRule = ao.tolerance.describe();
  c.alignment = alignRuns(a, b, ao);
  c.coverageA = opts.coverageA ? *opts.coverageA : coverageOf(a, opts.filterA);
  c.coverageB = opts.coverageB ? *opts.coverageB : coverageOf(b, opts.filterB);
  fillLosses(a, b, opts, c);
  fillGradients(a, b, opts, c);
  fillTransfers(a, b, c);
  c.schedule = compareSchedules(a, b);
  c.captureAgainstPlan = captureAgainstPlan(a, b, opts);
  for (const auto& m : compareReplicas(a).mismatches) c.replicasA.push_back(describe(a, m));
  for (const auto& m : compareReplicas(b).mismatches) c.replicasB.push_back(describe(b, m));
  decideVerdict(a, b, opts, c);
  // Unrelated runs: nothing is equal or divergent between them, and no item is "first".
  if (c.refused = whyNotComparable(a, b, opts.labelA, opts.labelB); !c.refused.empty()) {
    c.verdict = Verdict::Incomplete;
    c.verdictReason = "cannot compare the runs: " + c.refused;
    c.first.reset();
    c.firstText.clear();
  }
  return c;
}

int exitCodeOf(Verdict v) {
  switch (v) {
    case Verdict::Identical:
    case Verdict::WithinTolerance:
      return 0;
    case Verdict::Diverged:
      return 18;
    case Verdict::Incomplete:
      return 19;
  }
  return 1;
}

std::string describeItem(const AlignedItem& it) {
  std::ostringstream o;
  o.precision(3);
  switch (it.kind) {
    case ItemKind::Transfer:
      o << "message " << it.key;
      break;
    case ItemKind::Loss:
      o << it.key;
      break;
    case ItemKind::Input:
      o << "input of " << it.module << " iteration " << it.iteration << " global sample "
        << it.sample << " (dp" << it.dp << " microbatch " << it.microbatch << ")";
      break;
    case ItemKind::Gradient:
      if (it.phase == events::GradPhase::ParamInitial) {
        o << "initial parameter " << it.param;
      } else if (it.phase == events::GradPhase::Accumulated) {
        o << "accumulated gradient of " << it.param << " iteration " << it.iteration << " dp"
          << it.dp << " microbatch " << it.microbatch;
      } else {
        o << "gradient of " << it.param << " iteration " << it.iteration;
      }
      break;
  }
  o << ": " << toString(it.state);
  if (it.evidence != Evidence::None) o << " by " << toString(it.evidence);
  if (it.state == ItemState::Differ || it.state == ItemState::WithinTolerance) {
    if (it.sidesDisagreeIn) {
      o << " (sender and receiver disagree in "
        << (it.sidesDisagreeIn == 3   ? "both runs"
            : it.sidesDisagreeIn == 1 ? "A"
                                      : "B")
        << ")";
    } else if (std::isinf(it.distance) && it.kind == ItemKind::Input) {
      o << " (other values)";
    } else if (std::isinf(it.distance)) {
      o << (it.evidence == Evidence::Checksums ? " (checksums differ)"
                                               : " (non-finite or shape mismatch)");
    } else {
      // Within the relative L2 bound, one element off (Align.h, elementRatio).  Never "<" in
      // a first divergence: Markdown output escapes it.
      if (it.elementBound >= 0 && it.elementRatio > it.elementBound) {
        o << ", relative L2 " << it.distance << " (within " << it.tolerance << ") but element "
          << it.worstElement << " differs by " << it.elementRatio << " x its scale > "
          << it.elementBound << " (element-wise, iteration 0)";
      } else {
        o << (it.kind == ItemKind::Input ? ", largest element difference " : ", relative L2 ")
          << it.distance << (it.state == ItemState::Differ ? " > " : " <= ") << it.tolerance;
      }
      if (it.phase == events::GradPhase::ParamInitial && it.tolerance == 0)
        o << " (the same layout draws the same bytes: bitwise required)";
    }
  }
  if (it.kind != ItemKind::Gradient && it.kind != ItemKind::Input &&
      it.evidence != Evidence::Checksums) {
    o << " (A " << it.valueA << ", B " << it.valueB << ")";
  }
  return o.str();
}

}  // namespace stagescope::analysis
