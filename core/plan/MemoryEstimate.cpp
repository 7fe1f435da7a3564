#include "core/plan/MemoryEstimate.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace stagescope::plan {
namespace {

// Measured with tests/bench/rank_memory.py (smaps_rollup of every rank while a tiny model
// runs, recording off; bench/results.md part 7): a rank forked from the launcher has ~2.5 MB
// of private pages, an exec'd one ~61 MB (its own LibTorch operator registry); a rank's pages
// shared with the launcher and the other ranks (libraries, the registry) are ~103 MB, counted
// once.  The baselines are rounded up to leave room for larger groups' Gloo pairs and threads.
constexpr double kMB = 1e6;
constexpr double kForkedRankBytes = 6 * kMB;
constexpr double kExecRankBytes = 66 * kMB;
constexpr double kSharedBytes = 110 * kMB;

double dtypeBytes(const RunConfig& c) {
  return c.dtype == events::Dtype::BFloat16 ? 2.0 : 4.0;
}

// Optimizer state tensors per parameter: Adam keeps two moments, SGD a momentum buffer when
// momentum is set.
double optimizerStates(const OptimizerConfig& o) {
  if (o.kind == events::OptimizerKind::Adam) return 2;
  return o.momentum != 0 ? 1 : 0;
}

// Sequence length and micro-batch size of one microbatch on `m`'s stages.
double sequenceOf(const RunConfig& c, const ModuleConfig& m) {
  if (m.isEncoder()) return m.patches;
  double s = m.textLen;
  for (const auto* e : c.encoders()) s += e->patches;
  return s;
}
double microBatchOf(const RunConfig& c, const ModuleConfig& m) {
  return m.isEncoder() ? c.encoderMicroBatchSize(m) : c.microBatchSize;
}

// Elements autograd keeps for one microbatch of one stage.  Per transformer block (S tokens,
// B samples, width h, ffn f, a heads, TP degree t): the block input, the normalised input,
// q, k, v and the attention context (h/t each), the residual sum and its normalised copy,
// the MLP's pre- and post-GELU activations (f/t each) and the softmax output (a/t heads of
// S x S):  S*B*(4h + 4h/t + 2f/t) + B*(a/t)*S^2.  Plus the stage's output, and on the
// language model's last stage the logits and their log-softmax (2*T*B*vocab).
double activationElements(const RunConfig& c, const ModuleConfig& m, int stage) {
  const double S = sequenceOf(c, m), B = microBatchOf(c, m), h = m.hidden, f = m.ffn;
  const double t = m.tp, a = m.heads;
  const double block = S * B * (4 * h + 4 * h / t + 2 * f / t) + B * (a / t) * S * S;
  double total = block * m.layersOfStage(stage) + S * B * h;
  if (m.isLlm() && stage == m.pp - 1) total += 2.0 * m.textLen * B * m.vocab;
  return total;
}

// The most microbatches this rank holds activations for at once: forwards minus backwards
// over its action list (one in forward-only runs, where nothing is kept for a backward).
// Of the actions of `module` on this rank (a colocated rank holds several stages).
int peakMicrobatches(const RankPlan& r, const std::string& module, bool forwardOnly) {
  if (forwardOnly) return 1;
  int live = 0, peak = 0;
  for (const Action& a : r.actions) {
    if (a.module != module) continue;
    if (a.kind == events::ActionKind::Forward) peak = std::max(peak, ++live);
    if (a.kind == events::ActionKind::Backward) --live;
  }
  return std::max(peak, 1);
}

std::string oneDecimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

double stageParameterCount(const RunConfig& c, const ModuleConfig& m, int stage) {
  const double h = m.hidden;
  const int t = m.tp;
  // A TP-partitioned dimension of size n holds n / t rows on each rank (integer division, as
  // the engine narrows it); t = 1 holds all.
  auto shard = [t](int n) { return static_cast<double>(t > 1 ? n / t : n); };
  double n = 0;
  if (stage == 0) {
    if (m.isEncoder())
      n += h * m.patchDim + h + static_cast<double>(m.patches) * h;
    else
      n += static_cast<double>(m.vocab) * h + sequenceOf(c, m) * h;
  }
  const double block = 2 * h                                          // ln1
                       + 3 * (shard(m.hidden) * h + shard(m.hidden))  // q, k, v (rows split)
                       + h * shard(m.hidden) + h                      // o (columns split), bias
                       + 2 * h                                        // ln2
                       + shard(m.ffn) * h + shard(m.ffn)              // fc1 (rows split)
                       + h * shard(m.ffn) + h;                        // fc2 (columns split), bias
  n += block * m.layersOfStage(stage);
  if (stage == m.pp - 1) {
    n += 2 * h;  // final_ln
    if (m.isEncoder())
      n += static_cast<double>(c.llm().hidden) * h + c.llm().hidden;
    else
      n += static_cast<double>(m.vocab) * h;
  }
  return n;
}

bool forkedRanksFor(const RunConfig& c) {
  const char* mode = std::getenv("STAGESCOPE_EXEC_RANKS");
  return c.device == Device::Cpu && !(mode && std::string(mode) == "1");
}

double MemoryEstimate::totalBytes() const {
  double t = sharedBytes;
  for (const auto& r : ranks) t += r.total();
  return t;
}

const RankMemory& MemoryEstimate::largestRank() const {
  return *std::max_element(ranks.begin(), ranks.end(),
                           [](const auto& a, const auto& b) { return a.total() < b.total(); });
}

MemoryEstimate estimateMemory(const RunConfig& c, const Plan& plan, bool forkedRanks) {
  MemoryEstimate e;
  e.forkedRanks = forkedRanks;
  e.sharedBytes = kSharedBytes;
  const double elt = dtypeBytes(c);
  // value + gradient + optimizer state + the flat gradient buffer of the DP reduction
  const double copies = 3 + (c.forwardOnly ? -2 : optimizerStates(c.optimizer));
  for (const RankPlan& r : plan.ranks) {
    RankMemory rm;
    rm.rank = r.rank;
    rm.module = r.modules();
    rm.stage = r.stages.size() == 1 ? r.stages.front().pp : -1;
    rm.processBytes = forkedRanks ? kForkedRankBytes : kExecRankBytes;
    for (const RankStage& s : r.stages) {  // a colocated rank: the sum over its stages
      const ModuleConfig& m = c.module(s.module);
      const int peak = peakMicrobatches(r, s.module, plan.forwardOnly);
      rm.parameters += stageParameterCount(c, m, s.pp);
      rm.activationBytes += activationElements(c, m, s.pp) * elt * peak;
      rm.peakMicrobatches = std::max(rm.peakMicrobatches, peak);
    }
    rm.stateBytes = rm.parameters * elt * copies;
    e.ranks.push_back(rm);
  }
  return e;
}

std::string formatBytes(double bytes) {
  const char* unit[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (bytes >= 1000 && u < 6) {
    bytes /= 1000;
    ++u;
  }
  return (u == 0 ? std::to_string(static_cast<long long>(bytes)) : oneDecimal(bytes)) + " " +
         unit[u];
}

std::string renderMemoryEstimate(const MemoryEstimate& e) {
  std::ostringstream o;
  const RankMemory& big = e.largestRank();
  o << "memory estimate: " << formatBytes(e.totalBytes())
    << " in total = " << formatBytes(e.sharedBytes) << " shared + " << e.ranks.size()
    << " ranks (ranks " << (e.forkedRanks ? "forked from the launcher" : "exec'd")
    << "); the largest is rank " << big.rank << " with " << formatBytes(big.total()) << "\n";
  // One line per (module, stage): its ranks are alike.
  std::map<std::pair<std::string, int>, std::vector<const RankMemory*>> groups;
  std::vector<std::pair<std::string, int>> order;
  for (const auto& r : e.ranks) {
    auto key = std::make_pair(r.module, r.stage);
    if (groups.find(key) == groups.end()) order.push_back(key);
    groups[key].push_back(&r);
  }
  for (const auto& key : order) {
    const auto& rs = groups[key];
    const RankMemory& r = **std::max_element(
        rs.begin(), rs.end(), [](auto* a, auto* b) { return a->total() < b->total(); });
    o << "  " << key.first << (key.second >= 0 ? " stage " + std::to_string(key.second) : "")
      << " (" << rs.size() << (rs.size() == 1 ? " rank" : " ranks")
      << "): " << formatBytes(r.total()) << " per rank = process " << formatBytes(r.processBytes)
      << " + parameters " << formatBytes(r.stateBytes) << " ("
      << static_cast<long long>(r.parameters)
      << " elements with gradients and optimizer state) + activations "
      << formatBytes(r.activationBytes) << " (" << r.peakMicrobatches
      << (r.peakMicrobatches == 1 ? " microbatch" : " microbatches") << " held at once)\n";
  }
  return o.str();
}

double availableMemoryBytes() {
  const char* alt = std::getenv("STAGESCOPE_MEMINFO");
  std::ifstream in(alt && *alt ? alt : "/proc/meminfo");
  std::string key;
  double kb;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kb * 1000.0 * 1.024;  // the file's "kB" are KiB
  }
  return -1;
}

std::string memoryRefusal(const MemoryEstimate& e, double available) {
  if (available < 0 || e.totalBytes() <= available) return "";
  const RankMemory& big = e.largestRank();
  return "estimated peak memory " + formatBytes(e.totalBytes()) + " (" +
         std::to_string(e.ranks.size()) + " ranks, the largest rank " + std::to_string(big.rank) +
         " with " + formatBytes(big.total()) + ", plus " + formatBytes(e.sharedBytes) +
         " shared) exceeds the " + formatBytes(available) +
         " available on this machine (MemAvailable); expected fewer or smaller ranks "
         "(`stagescope plan` itemises the estimate), or pass --force to run anyway";
}

}  // namespace stagescope::plan
