// Module DAG, global stages and bridges (schedule.md §3.2, §3.3, §4.5).
#include "core/plan/Topology.h"

#include <algorithm>
#include <stdexcept>

namespace stagescope::plan {
namespace {

bool holds(const std::vector<int>& list, int rank) {
  return std::find(list.begin(), list.end(), rank) != list.end();
}

// Per DP replica, the TP ranks (cp = 1) at pp index `ppIndex`, from the raw [tp,cp]
// enumeration (dp slowest, then pp).
std::vector<std::vector<int>> boundary(const Grid& grid, int ppIndex) {
  std::vector<std::vector<int>> out;
  for (auto& list : grid.rawEnumeration({"tp", "cp"})) {
    if (grid.coord(list.front(), "pp") == ppIndex) out.push_back(list);
  }
  return out;
}

// Per DP replica, the raw enumeration over [tp,cp,pp] (tp slowest, pp fastest): the src
// leader is the last entry (tp=T-1, pp=P-1), the dest leader the first (tp=0, pp=0).
std::vector<int> leaders(const Grid& grid, bool last) {
  std::vector<int> out;
  for (auto& list : grid.rawEnumeration({"tp", "cp", "pp"})) {
    out.push_back(last ? list.back() : list.front());
  }
  return out;
}

}  // namespace

std::vector<int> Bridge::peersOf(int rank) const {
  if (auto it = sendTo.find(rank); it != sendTo.end()) return it->second;
  if (auto it = recvFrom.find(rank); it != recvFrom.end()) return it->second;
  return {};
}

BridgeRankRole Bridge::roleOf(int rank) const {
  if (sendTo.count(rank)) return BridgeRankRole::Sender;
  if (recvFrom.count(rank)) return BridgeRankRole::Receiver;
  return BridgeRankRole::Member;
}

std::vector<int> Bridge::boundaryOf(int rank) const {
  for (const auto& list : srcBoundary) {
    if (holds(list, rank)) return list;
  }
  for (const auto& list : destBoundary) {
    if (holds(list, rank)) return list;
  }
  return {};
}

int Bridge::localLeaderOf(int rank) const {
  for (size_t i = 0; i < srcBoundary.size(); ++i) {
    if (holds(srcBoundary[i], rank)) return srcLeaders[i];
  }
  for (size_t i = 0; i < destBoundary.size(); ++i) {
    if (holds(destBoundary[i], rank)) return destLeaders[i];
  }
  return -1;
}

std::vector<int> Bridge::sendPeersOf(int rank) const {
  auto it = sendTo.find(rank);
  return it == sendTo.end() ? std::vector<int>{} : it->second;
}

std::vector<int> Bridge::recvPeersOf(int rank) const {
  auto it = recvFrom.find(rank);
  return it == recvFrom.end() ? std::vector<int>{} : it->second;
}

std::vector<int> Bridge::srcBoundaryOf(int rank) const {
  for (const auto& list : srcBoundary) {
    if (holds(list, rank)) return list;
  }
  return {};
}

std::vector<int> Bridge::destBoundaryOf(int rank) const {
  for (const auto& list : destBoundary) {
    if (holds(list, rank)) return list;
  }
  return {};
}

int Bridge::srcLocalLeaderOf(int rank) const {
  for (size_t i = 0; i < srcBoundary.size(); ++i) {
    if (holds(srcBoundary[i], rank)) return srcLeaders[i];
  }
  return -1;
}

int Bridge::destLocalLeaderOf(int rank) const {
  for (size_t i = 0; i < destBoundary.size(); ++i) {
    if (holds(destBoundary[i], rank)) return destLeaders[i];
  }
  return -1;
}

std::vector<int> Bridge::leaders() const {
  std::vector<int> l = srcLeaders;
  l.insert(l.end(), destLeaders.begin(), destLeaders.end());
  std::sort(l.begin(), l.end());
  l.erase(std::unique(l.begin(), l.end()), l.end());
  return l;
}

Bridge makeBridge(const ModuleConfig& src, const ModuleConfig& dest, int worldSize,
                  bool colocated) {
  Grid srcGrid = moduleGrid(src.tp, src.cp, src.pp, src.dp, src.offset, worldSize);
  Grid destGrid = moduleGrid(dest.tp, dest.cp, dest.pp, dest.dp, dest.offset, worldSize);
  Bridge b;
  b.src = src.name;
  b.dest = dest.name;
  b.name = src.name + "->" + dest.name;
  b.srcBoundary = boundary(srcGrid, src.pp - 1);
  b.destBoundary = boundary(destGrid, 0);
  b.srcLeaders = leaders(srcGrid, /*last=*/true);
  b.destLeaders = leaders(destGrid, /*last=*/false);
  b.colocated = colocated;
  size_t s = b.srcLeaders.size(), d = b.destLeaders.size();
  if (s % d != 0 && d % s != 0) {
    throw ConfigError("modules." + src.name + ".dp",
                      "bridge " + b.name + ": modules." + src.name + ".dp = " + std::to_string(s) +
                          ": the dp of " + dest.name + " (" + std::to_string(d) +
                          ") and this dp must divide one another");
  }
  if (colocated) {
    // Every TP rank of a src replica's last stage holds the same full activation (reference
    // §3.4), so any of them may lead: take the one that is a dest leader this replica sends
    // to, making that hand-off local.  The comm map below is by DP index, so it is unchanged.
    for (size_t i = 0; i < s; ++i) {
      const size_t lo = s > d ? i / (s / d) : i * (d / s);
      const size_t hi = s > d ? lo + 1 : lo + d / s;
      for (size_t j = lo; j < hi; ++j) {
        if (holds(b.srcBoundary[i], b.destLeaders[j])) {
          b.srcLeaders[i] = b.destLeaders[j];
          break;
        }
      }
    }
  }
  if (s > d) {  // fan-in: dest leader i receives from k consecutive src leaders
    size_t k = s / d;
    for (size_t i = 0; i < d; ++i) {
      for (size_t j = i * k; j < (i + 1) * k; ++j) {
        b.recvFrom[b.destLeaders[i]].push_back(b.srcLeaders[j]);
        b.sendTo[b.srcLeaders[j]] = {b.destLeaders[i]};
      }
    }
  } else {  // fan-out or 1:1: src leader i sends to k consecutive dest leaders
    size_t k = d / s;
    for (size_t i = 0; i < s; ++i) {
      for (size_t j = i * k; j < (i + 1) * k; ++j) {
        b.sendTo[b.srcLeaders[i]].push_back(b.destLeaders[j]);
        b.recvFrom[b.destLeaders[j]] = {b.srcLeaders[i]};
      }
    }
  }
  return b;
}

Topology::Topology(const RunConfig& config) : colocation_(analyzeColocation(config)) {
  const ModuleConfig& llm = config.llm();
  for (const auto& m : config.modules) {
    order_.push_back(m.name);
    grids_.push_back(moduleGrid(m.tp, m.cp, m.pp, m.dp, m.offset, config.worldSize));
  }
  const int llmFirst = colocation_.node(llm.name, 0);
  for (const ModuleConfig* enc : config.encoders()) {
    const int last = colocation_.node(enc->name, enc->pp - 1);
    const bool colocated = colocation_.slotOf[last] == colocation_.slotOf[llmFirst];
    bridges_.push_back(makeBridge(*enc, llm, config.worldSize, colocated));
  }
}

std::vector<const Bridge*> Topology::bridgesInto(const std::string& dest) const {
  std::vector<const Bridge*> out;
  for (const auto& b : bridges_) {
    if (b.dest == dest) out.push_back(&b);
  }
  return out;
}

std::vector<const Bridge*> Topology::bridgesOutOf(const std::string& src) const {
  std::vector<const Bridge*> out;
  for (const auto& b : bridges_) {
    if (b.src == src) out.push_back(&b);
  }
  return out;
}

bool Topology::isSource(const std::string& module) const {
  return bridgesInto(module).empty();
}
bool Topology::isSink(const std::string& module) const {
  return bridgesOutOf(module).empty();
}

int Topology::indexOf(const std::string& module) const {
  auto it = std::find(order_.begin(), order_.end(), module);
  if (it == order_.end()) throw std::invalid_argument("unknown module " + module);
  return static_cast<int>(it - order_.begin());
}

int Topology::globalStage(const std::string& module, int ppIndex) const {
  const int node = colocation_.node(module, ppIndex);
  if (node < 0) {
    throw std::invalid_argument("unknown stage " + std::to_string(ppIndex) + " of module " +
                                module);
  }
  return colocation_.globalStage(node);
}

int Topology::firstStageOf(const std::string& module) const {
  return globalStage(module, 0);
}

std::vector<const StageNode*> Topology::stagesOf(int rank) const {
  std::vector<const StageNode*> out;
  for (const auto& slot : colocation_.slotNodes) {
    const StageNode& first = colocation_.nodes[static_cast<size_t>(slot.front())];
    if (!holds(first.ranks, rank)) continue;
    for (int n : slot) out.push_back(&colocation_.nodes[static_cast<size_t>(n)]);
    break;
  }
  return out;
}

int Topology::warmup(const std::string& module, int ppIndex, int microbatches) const {
  return std::min(totalStages() - globalStage(module, ppIndex) - 1, microbatches);
}

const Grid& Topology::grid(const std::string& module) const {
  return grids_[indexOf(module)];
}

}  // namespace stagescope::plan
