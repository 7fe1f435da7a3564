#include "core/analysis/Compare.h"

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
  s.events += run.transfers.size() + run.gradients.size() + run.losses.size();
  s.time = timeBreakdown(run);
  return s;
}

bool sameLayout(const RunModel& a, const RunModel& b) {
  if (a.info.modules.size() != b.info.modules.size()) return false;
  if (a.info.microbatches != b.info.microbatches) return false;
  for (size_t i = 0; i < a.info.modules.size(); ++i) {
    const auto& x = a.info.modules[i];
    const auto& y = b.info.modules[i];
    if (x.name != y.name || x.tp != y.tp || x.pp != y.pp || x.dp != y.dp || x.cp != y.cp) {
      return false;
    }
  }
  return true;
}

// ---- losses ---------------------------------------------------------------------------------
struct LossKey {
  int iteration, microbatch, dp;
  bool operator<(const LossKey& o) const {
    return std::tie(iteration, microbatch, dp) < std::tie(o.iteration, o.microbatch, o.dp);
  }
};

int dpCount(const RunModel& run) {
  int d = 0;
  for (const auto& l : run.losses) d = std::max(d, l.dp + 1);
  return d;
}

std::map<LossKey, double> lossMap(const RunModel& run, bool mergeDp) {
  std::map<LossKey, double> unique;  // (iteration, mb, dp) -> loss (first record: TP copies)
  for (const auto& l : run.losses) {
    if (l.microbatch < 0) continue;
    unique.emplace(LossKey{l.iteration, l.microbatch, l.dp}, l.loss);
  }
  if (!mergeDp) return unique;
  std::map<LossKey, std::pair<double, int>> sums;
  for (const auto& [k, v] : unique) {
    auto& s = sums[{k.iteration, k.microbatch, -1}];
    s.first += v;
    s.second += 1;
  }
  std::map<LossKey, double> out;
  for (const auto& [k, v] : sums) out[k] = v.first / v.second;
  return out;
}

void compareLosses(const RunModel& a, const RunModel& b, const CompareOptions& opts,
                   Comparison& c) {
  bool mergeDp = dpCount(a) != dpCount(b);
  auto la = lossMap(a, mergeDp), lb = lossMap(b, mergeDp);
  std::set<LossKey> keys;
  for (const auto& kv : la) keys.insert(kv.first);
  for (const auto& kv : lb) keys.insert(kv.first);
  int iterations = 0;
  for (const auto& k : keys) iterations = std::max(iterations, k.iteration + 1);
  std::vector<double> sa(iterations, 0), sb(iterations, 0);
  std::vector<int> na(iterations, 0), nb(iterations, 0);
  for (const auto& k : keys) {
    LossRow r;
    r.iteration = k.iteration;
    r.microbatch = k.microbatch;
    r.dp = k.dp;
    auto ia = la.find(k);
    auto ib = lb.find(k);
    if (ia != la.end()) {
      r.hasA = true;
      r.a = ia->second;
      if (k.iteration >= 0) sa[k.iteration] += r.a, na[k.iteration]++;
    }
    if (ib != lb.end()) {
      r.hasB = true;
      r.b = ib->second;
      if (k.iteration >= 0) sb[k.iteration] += r.b, nb[k.iteration]++;
    }
    if (r.hasA && r.hasB) {
      ++c.lossesCompared;
      r.diff = r.b - r.a;
      r.relDiff = relativeDifference(r.a, r.b);
      bool equal = r.a == r.b || (std::isnan(r.a) && std::isnan(r.b));
      if (!equal) ++c.lossesDiffering;
      if (!std::isnan(r.relDiff)) c.maxLossRelDiff = std::max(c.maxLossRelDiff, r.relDiff);
    } else {
      ++c.lossesOnlyOne;
    }
    if (c.losses.size() < opts.maxLossRows) c.losses.push_back(r);
  }
  for (int i = 0; i < iterations; ++i) {
    c.iterLossA.push_back(na[i] ? sa[i] / na[i] : NAN);
    c.iterLossB.push_back(nb[i] ? sb[i] / nb[i] : NAN);
  }
}

// ---- gradients ------------------------------------------------------------------------------
void compareGradients(const RunModel& a, const RunModel& b, const CompareOptions& opts,
                      Comparison& c) {
  auto ga = gatherGradients(a, events::GradPhase::Reduced, true);
  auto gb = gatherGradients(b, events::GradPhase::Reduced, true);
  auto key = [](const GatheredGradient& g) { return std::tie(g.iteration, g.param); };
  std::vector<GradRow> rows;
  int iterations = 0;
  for (const auto& g : ga) iterations = std::max(iterations, g.iteration + 1);
  for (const auto& g : gb) iterations = std::max(iterations, g.iteration + 1);
  std::vector<double> ta(iterations, 0), tb(iterations, 0);
  // Per-iteration floor for relative differences: a gradient several orders below the whole
  // model's gradient norm holds only float32 rounding noise in both runs.
  std::vector<double> floorOf(iterations, opts.gradNormFloor);
  {
    std::vector<double> total(iterations, 0);
    for (const auto& g : ga) {
      if (g.iteration >= 0) total[g.iteration] += g.norm * g.norm;
    }
    for (int k = 0; k < iterations; ++k) {
      floorOf[k] = std::max(opts.gradNormFloor, opts.gradNormFloorRel * std::sqrt(total[k]));
    }
  }
  size_t i = 0, j = 0;
  int lastCommon = -1;
  while (i < ga.size() || j < gb.size()) {
    GradRow r;
    const GatheredGradient* x = nullptr;
    const GatheredGradient* y = nullptr;
    if (j >= gb.size() || (i < ga.size() && key(ga[i]) < key(gb[j]))) {
      x = &ga[i++];
    } else if (i >= ga.size() || key(gb[j]) < key(ga[i])) {
      y = &gb[j++];
    } else {
      x = &ga[i++];
      y = &gb[j++];
    }
    const auto& any = x ? *x : *y;
    r.param = any.param;
    r.iteration = any.iteration;
    if (x) {
      r.hasA = true;
      r.normA = x->norm;
      if (x->iteration >= 0) ta[x->iteration] += x->norm * x->norm;
    }
    if (y) {
      r.hasB = true;
      r.normB = y->norm;
      if (y->iteration >= 0) tb[y->iteration] += y->norm * y->norm;
    }
    if (x && y) {
      ++c.gradsCompared;
      lastCommon = std::max(lastCommon, r.iteration);
      if (x->hasValues && y->hasValues && x->values.size() == y->values.size()) {
        r.how = "values";
        double d2 = 0, n2 = 0, m2 = 0;
        for (size_t k = 0; k < x->values.size(); ++k) {
          double d = x->values[k] - y->values[k];
          d2 += d * d;
          n2 += x->values[k] * x->values[k];
          m2 += y->values[k] * y->values[k];
        }
        r.bitwiseEqual = x->values == y->values;
        double den = std::max(std::sqrt(std::max(n2, m2)), floorOf[r.iteration]);
        r.relDiff = r.bitwiseEqual ? 0 : (den > 0 ? std::sqrt(d2) / den : INFINITY);
      } else if (x->layout == y->layout && x->shardChecksums == y->shardChecksums &&
                 std::none_of(x->shardChecksums.begin(), x->shardChecksums.end(),
                              [](uint64_t v) { return v == 0; })) {
        r.how = "checksums";
        r.bitwiseEqual = true;
        r.relDiff = 0;
      } else {
        r.how = "norms";
        r.relDiff = std::fabs(x->norm - y->norm) /
                    std::max({std::fabs(x->norm), std::fabs(y->norm), floorOf[r.iteration]});
        r.bitwiseEqual =
            x->norm == y->norm && x->layout == y->layout && x->shardChecksums == y->shardChecksums;
      }
      if (!r.bitwiseEqual) ++c.gradsDiffering;
      if (!std::isnan(r.relDiff)) c.maxGradRelDiff = std::max(c.maxGradRelDiff, r.relDiff);
    } else {
      ++c.gradsOnlyOne;
    }
    rows.push_back(std::move(r));
  }
  for (int k = 0; k < iterations; ++k) {
    c.totalNormA.push_back(std::sqrt(ta[k]));
    c.totalNormB.push_back(std::sqrt(tb[k]));
  }
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
  // Keep one row per parameter (its worst iteration).
  std::set<std::string> seen;
  for (const auto* r : diff) {
    if (c.gradTop.size() >= opts.topGradients) break;
    if (seen.insert(r->param).second) c.gradTop.push_back(*r);
  }
}

// ---- transfers ------------------------------------------------------------------------------
using TKey = std::array<int32_t, 6>;  // iteration, microbatch, direction, stageOrder, edge, srcDp

struct TGroup {
  TKey key;
  int64_t first = -1;  // representative record
  std::vector<uint64_t> checksums;
  bool shapeConsistent = true;
};

// P2P edges of modules whose pipeline depth differs between the runs name different layer
// boundaries ("llm:pp0->pp1" is after layer 2 of 4 with pp2, after layer 1 with pp4): such
// messages are not aligned (counted as only in A / only in B).
std::set<std::string> unalignedModules(const RunModel& a, const RunModel& b) {
  std::set<std::string> out;
  for (const auto& x : a.info.modules) {
    for (const auto& y : b.info.modules) {
      if (x.name == y.name && x.pp != y.pp) out.insert(x.name);
    }
  }
  return out;
}

bool aligned(const TransferRecord& t, const std::set<std::string>& unaligned) {
  if (unaligned.empty() || t.edgeKind != events::EdgeKind::P2P) return true;
  return !unaligned.count(t.edge.substr(0, t.edge.find(':')));
}

std::vector<TGroup> transferGroups(const RunModel& run,
                                   const std::unordered_map<std::string, int32_t>& edgeIds,
                                   const std::set<std::string>& unaligned, size_t* skipped) {
  std::vector<model::TransferPair> scratch;
  const auto& pairs = pairsOf(run, scratch);
  std::vector<std::pair<TKey, int64_t>> recs;
  recs.reserve(pairs.size());
  for (const auto& p : pairs) {
    int64_t idx = p.send >= 0 ? p.send : p.recv;
    if (idx < 0) continue;
    const auto& t = run.transfers[idx];
    if (!aligned(t, unaligned)) {
      ++*skipped;
      continue;
    }
    const auto* src = findRank(run, t.srcRank);
    int stage = src ? src->globalStage : -1;
    int dp = src ? src->dp : -1;
    int32_t order = t.direction == Direction::Activation ? stage : -stage;
    recs.push_back({TKey{t.iteration, t.microbatch, static_cast<int32_t>(t.direction), order,
                         edgeIds.at(t.edge), dp},
                    idx});
  }
  std::sort(recs.begin(), recs.end());
  std::vector<TGroup> out;
  for (size_t i = 0; i < recs.size();) {
    size_t j = i;
    TGroup g;
    g.key = recs[i].first;
    g.first = recs[i].second;
    const auto& f = run.transfers[g.first];
    for (; j < recs.size() && recs[j].first == g.key; ++j) {
      const auto& t = run.transfers[recs[j].second];
      g.checksums.push_back(t.checksum);
      if (t.shape != f.shape || t.dtype != f.dtype) g.shapeConsistent = false;
    }
    std::sort(g.checksums.begin(), g.checksums.end());
    g.checksums.erase(std::unique(g.checksums.begin(), g.checksums.end()), g.checksums.end());
    out.push_back(std::move(g));
    i = j;
  }
  return out;
}

TransferSideInfo sideInfo(const RunModel& run, const TGroup& g) {
  TransferSideInfo s;
  const auto& t = run.transfers[g.first];
  s.present = true;
  s.index = g.first;
  s.srcRank = t.srcRank;
  s.dstRank = t.dstRank;
  s.checksums = g.checksums;
  s.shape = t.shape;
  s.dtype = t.dtype;
  s.hasStats = t.hasStats;
  s.stats = t.stats;
  return s;
}

void compareTransfers(const RunModel& a, const RunModel& b, const CompareOptions& opts,
                      Comparison& c) {
  std::set<std::string> edges;
  for (const auto& t : a.transfers) edges.insert(t.edge);
  for (const auto& t : b.transfers) edges.insert(t.edge);
  std::unordered_map<std::string, int32_t> ids;
  std::vector<std::string> names(edges.begin(), edges.end());
  for (size_t i = 0; i < names.size(); ++i) ids[names[i]] = static_cast<int32_t>(i);
  auto unaligned = unalignedModules(a, b);
  auto ga = transferGroups(a, ids, unaligned, &c.transfersOnlyA);
  auto gb = transferGroups(b, ids, unaligned, &c.transfersOnlyB);
  bool layoutEqual = sameLayout(a, b);
  c.transfersComparable =
      a.info.level >= events::RecordLevel::Stats && b.info.level >= events::RecordLevel::Stats;
  size_t i = 0, j = 0;
  auto noteFirst = [&](const TKey& k, const TGroup* x, const TGroup* y, const char* reason) {
    if (c.firstDivergent) return;
    TransferDiff d;
    d.edge = names[k[4]];
    d.direction = static_cast<Direction>(k[2]);
    d.iteration = k[0];
    d.microbatch = k[1];
    d.srcDp = k[5];
    if (x) d.a = sideInfo(a, *x);
    if (y) d.b = sideInfo(b, *y);
    d.reason = reason;
    c.firstDivergent = std::move(d);
  };
  while (i < ga.size() || j < gb.size()) {
    if (j >= gb.size() || (i < ga.size() && ga[i].key < gb[j].key)) {
      ++c.transfersOnlyA;
      if (layoutEqual) noteFirst(ga[i].key, &ga[i], nullptr, "only in A");
      ++i;
      continue;
    }
    if (i >= ga.size() || gb[j].key < ga[i].key) {
      ++c.transfersOnlyB;
      if (layoutEqual) noteFirst(gb[j].key, nullptr, &gb[j], "only in B");
      ++j;
      continue;
    }
    const auto& x = ga[i++];
    const auto& y = gb[j++];
    ++c.transfersCompared;
    const auto& tx = a.transfers[x.first];
    const auto& ty = b.transfers[y.first];
    const char* reason = nullptr;
    if (tx.shape != ty.shape || tx.dtype != ty.dtype) {
      reason = "shape";
    } else if (c.transfersComparable && x.checksums != y.checksums) {
      reason = "checksum";
    }
    if (reason) {
      ++c.transfersDiffering;
      noteFirst(x.key, &x, &y, reason);
    }
  }
  if (c.firstDivergent && c.firstDivergent->a.present && c.firstDivergent->b.present) {
    auto& d = *c.firstDivergent;
    auto fetch = [&](int which, const RunModel& run, int64_t idx) {
      const auto& t = run.transfers[idx];
      if (!t.payload.empty()) return t.payload;
      if (opts.payload) return opts.payload(which, idx);
      return std::vector<uint8_t>{};
    };
    auto pa = fetch(0, a, d.a.index), pb = fetch(1, b, d.b.index);
    std::vector<double> va, vb;
    if (!pa.empty() && !pb.empty() && decodeValues(pa, d.a.dtype, &va) &&
        decodeValues(pb, d.b.dtype, &vb) && va.size() == vb.size()) {
      double d2 = 0, n2 = 0, mx = 0;
      for (size_t k = 0; k < va.size(); ++k) {
        double e = vb[k] - va[k];
        d2 += e * e;
        n2 += va[k] * va[k];
        mx = std::max(mx, std::fabs(e));
      }
      d.relDiff = n2 > 0 ? std::sqrt(d2 / n2) : (d2 > 0 ? INFINITY : 0);
      d.maxAbsDiff = mx;
    }
  }
}

void decideVerdict(const RunModel& a, const RunModel& b, const CompareOptions& opts,
                   Comparison& c) {
  bool layoutEqual = sameLayout(a, b);
  std::ostringstream why;
  bool lossWithin = c.maxLossRelDiff <= opts.relTol;
  bool gradWithin = c.maxGradRelDiff <= opts.gradRelTol;
  bool missing = layoutEqual && (c.lossesOnlyOne > 0 || c.gradsOnlyOne > 0 ||
                                 c.transfersOnlyA > 0 || c.transfersOnlyB > 0);
  bool transfersEqual = c.transfersDiffering == 0 && !(layoutEqual && c.firstDivergent);
  bool valuesJudged = c.lossesCompared + c.gradsCompared > 0;
  if (missing) {
    c.verdict = Verdict::Diverged;
    why << "the runs have the same layout but records are missing on one side (" << c.lossesOnlyOne
        << " losses, " << c.gradsOnlyOne << " gradients, " << c.transfersOnlyA + c.transfersOnlyB
        << " messages)";
  } else if (transfersEqual && c.lossesDiffering == 0 && c.gradsDiffering == 0) {
    c.verdict = Verdict::Identical;
    why << "all " << c.transfersCompared << " messages, " << c.lossesCompared << " losses and "
        << c.gradsCompared << " parameter gradients are bitwise equal";
  } else if (valuesJudged && lossWithin && gradWithin) {
    c.verdict = Verdict::WithinTolerance;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "losses (max rel diff %.3g, tol %.3g) and gradients (max rel diff %.3g, "
                  "tol %.3g) agree",
                  c.maxLossRelDiff, opts.relTol, c.maxGradRelDiff, opts.gradRelTol);
    why << buf;
    if (c.transfersDiffering) why << "; " << c.transfersDiffering << " messages differ bitwise";
  } else {
    c.verdict = Verdict::Diverged;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "max loss rel diff %.3g (tol %.3g), max gradient rel diff %.3g (tol %.3g)",
                  c.maxLossRelDiff, opts.relTol, c.maxGradRelDiff, opts.gradRelTol);
    why << buf;
    if (c.firstDivergent) {
      const auto& d = *c.firstDivergent;
      why << "; first divergent message: " << d.edge << " " << toString(d.direction)
          << " iteration " << d.iteration << " microbatch " << d.microbatch;
    }
  }
  c.verdictReason = why.str();
}

}  // namespace

Comparison compareRuns(const RunModel& a, const RunModel& b, const CompareOptions& opts) {
  Comparison c;
  c.a = summarize(a, opts.labelA);
  c.b = summarize(b, opts.labelB);
  c.configDiff = diffLines(a.info.configText, b.info.configText);
  c.configEqual = std::all_of(c.configDiff.begin(), c.configDiff.end(),
                              [](const ConfigDiffLine& l) { return l.op == ' '; });
  compareLosses(a, b, opts, c);
  compareGradients(a, b, opts, c);
  compareTransfers(a, b, opts, c);
  decideVerdict(a, b, opts, c);
  return c;
}

}  // namespace stagescope::analysis
