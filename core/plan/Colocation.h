// Colocation: which pipeline stages of which modules share ranks, whether that layout has a
// 1F1B order, and each stage's position in the combined pipeline.  Torch-free.
//
// A stage node is one (module, pp index) with every rank of its TP x DP replicas.  Modules
// may share ranks when the layout is consistent (docs/config.md, "Colocated modules"):
//  - whole stages only: two stage nodes that share a rank hold exactly the same ranks, so the
//    ranks of one slot (a set of ranks and the stage nodes it holds) all run the same action
//    order and every TP/DP collective stays inside one slot;
//  - no cycle between slots: data that leaves a slot never comes back to it (an encoder next
//    to a later llm stage, or next to a stage upstream of its own producer, is refused).
// Each slot is one position of the combined pipeline: its height is the longest path (in
// slots) from it to the pipeline's end, and every stage node it holds sits at global stage
// totalStages - 1 - height.  Without colocation this is exactly right alignment (reference
// §7.5); an encoder's last stage on the llm's first-stage ranks shares that stage's position.
#pragma once

#include <string>
#include <vector>

#include "core/plan/Config.h"

namespace stagescope::plan {

struct StageNode {
  std::string module;      // module name
  bool llm = false;        // the module is the llm
  int stage = 0;           // pp index
  std::vector<int> ranks;  // ascending global ranks of every TP x DP replica of this stage
  std::string label() const { return "\"" + module + "\" stage " + std::to_string(stage); }
};

struct Colocation {
  std::vector<StageNode> nodes;             // config order of modules, then pp order
  std::vector<int> slotOf;                  // per node: its slot
  std::vector<std::vector<int>> slotNodes;  // per slot: its nodes, encoders (config order) first
  std::vector<int> height;                  // per slot: longest path in slots to the end
  int totalStages = 0;                      // max height + 1
  bool any() const { return slotNodes.size() < nodes.size(); }  // some slot holds two stages
  int node(const std::string& module, int stage) const;         // index; -1 if none
  int globalStage(int node) const { return totalStages - 1 - height[slotOf[node]]; }
};

// Validates and analyses the module grids of `config` (names, kinds, grids and world size are
// already valid).  Throws ConfigError naming the rank, the stages and why, e.g.
//   "c.toml: modules.llm.offset = 0: grid of "llm" overlaps grid of "vision" at rank 0: ..."
Colocation analyzeColocation(const RunConfig& config);

}  // namespace stagescope::plan
