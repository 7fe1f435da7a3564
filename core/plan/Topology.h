// The module DAG (every encoder -> the language model), global stage indices, and the
// bridge topology between a module's last stage and the next module's first stage
// (reference §3.2, §3.3, §4.5).  Torch-free.
#pragma once

#include <map>
#include <string>
#include <vector>

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
  // The comm map (reference §3.3): sender leader -> its dest leaders, receiver leader -> its
  // src leaders, both in DP order.
  std::map<int, std::vector<int>> sendTo, recvFrom;
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
  // Every leader, src then dest: the members of the bridge's c10d group.
  std::vector<int> leaders() const;
};

// Builds the bridge; throws ConfigError naming both modules when neither DP size divides
// the other.
Bridge makeBridge(const ModuleConfig& src, const ModuleConfig& dest, int worldSize);

class Topology {
 public:
  explicit Topology(const RunConfig& config);

  const std::vector<Bridge>& bridges() const { return bridges_; }  // config order of src
  std::vector<const Bridge*> bridgesInto(const std::string& dest) const;
  std::vector<const Bridge*> bridgesOutOf(const std::string& src) const;
  bool isSource(const std::string& module) const;  // no incoming edge
  bool isSink(const std::string& module) const;    // no outgoing edge

  // Longest path through the DAG, each module weighted by its pp size.
  int totalStages() const { return totalStages_; }
  // Global stage of pp index `ppIndex` of `module`.  The sink chain follows the longest
  // path; a shorter branch is right-aligned so that stage(src last) = stage(dest first) - 1
  // on every edge (fixes the warmup mismatch of reference §7.5).
  int globalStage(const std::string& module, int ppIndex) const;
  int firstStageOf(const std::string& module) const;
  // 1F1B warmup forwards for a rank: min(totalStages - globalStage - 1, m).
  int warmup(const std::string& module, int ppIndex, int microbatches) const;

  const Grid& grid(const std::string& module) const;

 private:
  std::vector<std::string> order_;
  std::vector<Grid> grids_;
  std::vector<int> firstStage_;
  std::vector<Bridge> bridges_;
  int totalStages_ = 0;
  int indexOf(const std::string& module) const;
};

}  // namespace stagescope::plan
