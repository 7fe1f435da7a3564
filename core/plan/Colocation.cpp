// Stage nodes, slots and the combined pipeline position of every stage (Colocation.h).
#include "core/plan/Colocation.h"

#include <algorithm>
#include <map>
#include <set>

namespace stagescope::plan {
namespace {

// "0..3" for a contiguous list, "0, 2, 4" otherwise.
std::string ranksText(const std::vector<int>& ranks) {
  if (ranks.empty()) return "none";
  if (ranks.back() - ranks.front() + 1 == static_cast<int>(ranks.size())) {
    return ranks.size() == 1 ? std::to_string(ranks.front())
                             : std::to_string(ranks.front()) + ".." + std::to_string(ranks.back());
  }
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// The ranks of pp index `stage` of module `m` (grid [tp, cp, pp, dp], tp fastest).
std::vector<int> stageRanks(const ModuleConfig& m, int stage) {
  std::vector<int> out;
  for (int d = 0; d < m.dp; ++d) {
    for (int c = 0; c < m.cp; ++c) {
      for (int t = 0; t < m.tp; ++t) {
        out.push_back(m.offset + t + m.tp * (c + m.cp * (stage + m.pp * d)));
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

[[noreturn]] void refuse(const RunConfig& c, const ModuleConfig& m, const std::string& why) {
  throw ConfigError(
      "modules." + m.name + ".offset",
      c.sourceName + ": modules." + m.name + ".offset = " + std::to_string(m.offset) + ": " + why);
}

const ModuleConfig& moduleNamed(const RunConfig& c, const std::string& name) {
  return c.module(name);
}

// One node per stage of each module: config order of modules, then pp order.
void addStageNodes(const RunConfig& c, Colocation& col) {
  for (const auto& m : c.modules) {
    for (int s = 0; s < m.pp; ++s) {
      col.nodes.push_back({m.name, m.isLlm(), s, stageRanks(m, s)});
    }
  }
}

// Whole stages only: every node holding a rank holds the same ranks as the first one seen.
void refusePartialOverlaps(const RunConfig& c, const Colocation& col) {
  std::map<int, int> firstAt;  // rank -> first node holding it
  for (size_t i = 0; i < col.nodes.size(); ++i) {
    const StageNode& n = col.nodes[i];
    for (int r : n.ranks) {
      auto [it, fresh] = firstAt.emplace(r, static_cast<int>(i));
      if (fresh) continue;
      const StageNode& o = col.nodes[static_cast<size_t>(it->second)];
      if (o.ranks == n.ranks) continue;
      refuse(c, moduleNamed(c, n.module),
             "grid of \"" + n.module + "\" overlaps grid of \"" + o.module + "\" at rank " +
                 std::to_string(r) + ", but " + o.label() + " holds ranks " + ranksText(o.ranks) +
                 " and " + n.label() + " holds ranks " + ranksText(n.ranks) +
                 ": colocated stages must hold exactly the same ranks (e.g. two encoders on the "
                 "same ranks, or an encoder on the ranks of the llm's first stage)");
    }
  }
}

// Slots: one per distinct rank set, in order of first appearance.
void assignSlots(Colocation& col) {
  std::map<std::vector<int>, int> slotOfRanks;
  for (const StageNode& n : col.nodes) {
    auto [it, fresh] = slotOfRanks.emplace(n.ranks, static_cast<int>(col.slotNodes.size()));
    if (fresh) col.slotNodes.emplace_back();
    col.slotOf.push_back(it->second);
  }
  for (bool llmPass : {false, true}) {  // encoders (config order) first, then the llm
    for (size_t i = 0; i < col.nodes.size(); ++i) {
      if (col.nodes[i].llm == llmPass) col.slotNodes[col.slotOf[i]].push_back(static_cast<int>(i));
    }
  }
}

// The stage edges between slots: each slot's successors and predecessors, and for each slot
// edge a node edge behind it (nodes' indices).
struct SlotGraph {
  std::vector<std::set<int>> succ, pred;
  std::map<std::pair<int, int>, std::pair<int, int>> via;  // slot edge -> a node edge behind it
};

SlotGraph slotGraph(const RunConfig& c, const Colocation& col) {
  // Stage edges: pp k -> k+1 inside a module; every encoder's last stage -> llm stage 0.
  std::vector<std::pair<int, int>> edges;
  const int llmFirst = col.node(c.llm().name, 0);
  for (size_t i = 0; i < col.nodes.size(); ++i) {
    const StageNode& n = col.nodes[i];
    const int next = col.node(n.module, n.stage + 1);
    if (next >= 0) {
      edges.emplace_back(static_cast<int>(i), next);
    } else if (!n.llm) {
      edges.emplace_back(static_cast<int>(i), llmFirst);
    }
  }
  const size_t slots = col.slotNodes.size();
  SlotGraph g{std::vector<std::set<int>>(slots), std::vector<std::set<int>>(slots), {}};
  for (auto [a, b] : edges) {
    const int sa = col.slotOf[a], sb = col.slotOf[b];
    if (sa == sb) continue;  // an encoder handing its output to the llm on the same ranks
    g.succ[sa].insert(sb);
    g.pred[sb].insert(sa);
    g.via.emplace(std::make_pair(sa, sb), std::make_pair(a, b));
  }
  return g;
}

// Heights in reverse topological order (Kahn from the end); what is left lies on a cycle.
// `remaining`: per slot, its successors not yet done.  Returns how many slots are done.
size_t assignHeights(Colocation& col, const SlotGraph& g, std::vector<int>& remaining) {
  const size_t slots = col.slotNodes.size();
  remaining.assign(slots, 0);
  std::vector<int> ready;
  col.height.assign(slots, 0);
  for (size_t s = 0; s < slots; ++s) {
    remaining[s] = static_cast<int>(g.succ[s].size());
    if (remaining[s] == 0) ready.push_back(static_cast<int>(s));
  }
  size_t done = 0;
  while (!ready.empty()) {
    const int s = ready.back();
    ready.pop_back();
    ++done;
    for (int p : g.pred[s]) {
      col.height[p] = std::max(col.height[p], col.height[s] + 1);
      if (--remaining[p] == 0) ready.push_back(p);
    }
  }
  return done;
}

// Walk successors among the slots left (`remaining` > 0) until one repeats: that is a cycle.
std::vector<int> slotCycle(const SlotGraph& g, const std::vector<int>& remaining) {
  int s = 0;
  while (remaining[s] == 0) ++s;
  std::vector<int> path;
  std::map<int, size_t> seen;
  while (!seen.count(s)) {
    seen[s] = path.size();
    path.push_back(s);
    for (int t : g.succ[s]) {
      if (remaining[t] > 0) {
        s = t;
        break;
      }
    }
  }
  return std::vector<int>(path.begin() + static_cast<long>(seen[s]), path.end());
}

// The path around slot cycle `cycle` from its k-th slot back to it, by the node edges behind it:
// '"a" stage 1 -> "b" stage 0 (ranks 0..3) -> ...'.
std::string cycleChain(const Colocation& col, const SlotGraph& g, const std::vector<int>& cycle,
                       size_t k) {
  std::string chain;
  for (size_t j = 0; j < cycle.size(); ++j) {
    const auto e = g.via.at({cycle[(k + j) % cycle.size()], cycle[(k + j + 1) % cycle.size()]});
    if (j == 0) chain = col.nodes[e.first].label();
    chain += " -> " + col.nodes[e.second].label() + " (ranks " +
             ranksText(col.nodes[e.second].ranks) + ")";
  }
  return chain;
}

// The stages of the modules form a cycle between slots (`remaining` > 0 on it): refused, naming
// the rank where the cycle enters one stage and leaves through another.
[[noreturn]] void refuseCycle(const RunConfig& c, const Colocation& col, const SlotGraph& g,
                              const std::vector<int>& remaining) {
  const std::vector<int> cycle = slotCycle(g, remaining);
  // Name the rank where the cycle enters one stage and leaves through another.
  for (size_t k = 0; k < cycle.size(); ++k) {
    const int here = cycle[k];
    const int prev = cycle[(k + cycle.size() - 1) % cycle.size()];
    const auto in = g.via.at({prev, here});
    const int enters = in.second;
    const std::string chain = cycleChain(col, g, cycle, k);
    const auto out = g.via.at({here, cycle[(k + 1) % cycle.size()]});
    if (out.first == enters) continue;
    const StageNode& a = col.nodes[out.first];
    const StageNode& b = col.nodes[enters];
    refuse(c, moduleNamed(c, b.module),
           "rank " + std::to_string(a.ranks.front()) + " holds " + a.label() + " and " + b.label() +
               ", but the path " + chain +
               " leaves these ranks and comes back: the colocated stages would wait on each "
               "other; colocate stages at the same pipeline position (e.g. two encoders), or an "
               "encoder's last stage with the llm's first stage");
  }
  refuse(c, c.llm(), "the stages of the modules form a cycle between ranks");
}

}  // namespace

int Colocation::node(const std::string& module, int stage) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].module == module && nodes[i].stage == stage) return static_cast<int>(i);
  }
  return -1;
}

Colocation analyzeColocation(const RunConfig& c) {
  Colocation col;
  addStageNodes(c, col);
  refusePartialOverlaps(c, col);
  assignSlots(col);
  const SlotGraph g = slotGraph(c, col);
  std::vector<int> remaining;
  if (assignHeights(col, g, remaining) < col.slotNodes.size()) refuseCycle(c, col, g, remaining);
  int maxHeight = 0;
  for (int h : col.height) maxHeight = std::max(maxHeight, h);
  col.totalStages = maxHeight + 1;
  return col;
}

}  // namespace stagescope::plan
