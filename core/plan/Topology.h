// The module DAG (every encoder -> the language model), global stage indices, and the
// bridge topology between a module's last stage and the next module's first stage
// (schedule.md §3.2, §3.3, §4.5).  Torch-free.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/plan/Colocation.h"
#include "core/plan/Config.h"
#include "core/plan/Grid.h"

namespace stagescope::plan {

enum class BridgeRankRole { Member, Sender, Receiver };

// One edge src -> dest of the module DAG, with the reference's leader / comm-map semantics.
struct Bridge {
  std::string src, dest;                       // module names
  std::string name;                            // "src->dest"
  std::vector<std::vector<int>> srcBoundary;   // per src DP replica: TP ranks of the last pp stage
  std::vector<std::vector<int>> destBoundary;  // per dest DP replica: TP ranks of pp stage 0
  std::vector<int> srcLeaders;                 // per src DP replica: (tp=T-1, pp=last)
  std::vector<int> destLeaders;                // per dest DP replica: (tp=0, pp=0)
  // The comm map (schedule.md §3.3): sender leader -> its dest leaders, receiver leader -> its
  // src leaders, both in DP order.
  std::map<int, std::vector<int>> sendTo, recvFrom;
  // The src's last stage and the dest's first stage hold the same ranks (Colocation.h): the
  // bridge runs inside one slot, and a src leader is chosen among its boundary ranks to be the
  // dest leader it sends to where it can, so that hand-off is local (no wire).
  bool colocated = false;
  // Fan factor: fan-in when srcLeaders > destLeaders (k = S/D), fan-out when fewer (k = D/S).
  bool fanIn() const { return srcLeaders.size() > destLeaders.size(); }
  bool fanOut() const { return srcLeaders.size() < destLeaders.size(); }
  // For a leader: its peers in DP order (sender: send_to; receiver: recv_from). Empty otherwise.
  std::vector<int> peersOf(int rank) const;
  BridgeRankRole roleOf(int rank) const;
  // The boundary broadcast list holding `rank` (src or dest side), empty if none.
  std::vector<int> boundaryOf(int rank) const;
  // The leader of the boundary list holding `rank` (the rank that broadcasts to it), -1 if none.
  int localLeaderOf(int rank) const;
  // Side-specific forms, for a rank that is on both sides of a colocated bridge: its peers as a
  // src leader (send_to) or as a dest leader (recv_from); its boundary list and that list's
  // leader on the src side (last stage) or the dest side (first stage).
  std::vector<int> sendPeersOf(int rank) const;
  std::vector<int> recvPeersOf(int rank) const;
  std::vector<int> srcBoundaryOf(int rank) const;
  std::vector<int> destBoundaryOf(int rank) const;
  int srcLocalLeaderOf(int rank) const;
  int destLocalLeaderOf(int rank) const;
  // Every leader, ascending, each once: the members of the bridge's c10d group.
  std::vector<int> leaders() const;
};

// Builds the bridge; throws ConfigError naming both modules when neither DP size divides
// the other.  `colocated`: see Bridge::colocated.
Bridge makeBridge(const ModuleConfig& src, const ModuleConfig& dest, int worldSize,
                  bool colocated = false);

class Topology {
 public:
  explicit Topology(const RunConfig& config);

  const std::vector<Bridge>& bridges() const { return bridges_; }  // config order of src
  std::vector<const Bridge*> bridgesInto(const std::string& dest) const;
  std::vector<const Bridge*> bridgesOutOf(const std::string& src) const;
  bool isSource(const std::string& module) const;  // no incoming edge
  bool isSink(const std::string& module) const;    // no outgoing edge

  // Positions of the combined pipeline: the longest path through the slots (Colocation.h);
  // without colocation, the longest path through the DAG, each module weighted by its pp size.
  int totalStages() const { return colocation_.totalStages; }
  // Global stage of pp index `ppIndex` of `module`: totalStages - 1 - the height of its slot.
  // Without colocation the sink chain follows the longest path and a shorter branch is
  // right-aligned so that stage(src last) = stage(dest first) - 1 on every edge (fixes the
  // warmup mismatch of schedule.md §7.5); stages on the same ranks share one position.
  int globalStage(const std::string& module, int ppIndex) const;
  const Colocation& colocation() const { return colocation_; }
  // The stage nodes rank `rank` holds, in its forward order (encoders in config order, then the
  // llm); empty when none.
  std::vector<const StageNode*> stagesOf(int rank) const;
  int firstStageOf(const std::string& module) const;
  // 1F1B warmup forwards for a rank: min(totalStages - globalStage - 1, m).
  int warmup(const std::string& module, int ppIndex, int microbatches) const;

  const Grid& grid(const std::string& module) const;

 private:
  std::vector<std::string> order_;
  std::vector<Grid> grids_;
  std::vector<Bridge> bridges_;
  Colocation colocation_;
  int indexOf(const std::string& module) const;
};

}  // namespace stagescope::plan
