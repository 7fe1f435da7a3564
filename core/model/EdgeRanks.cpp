#include "core/model/EdgeRanks.h"

#include <algorithm>
#include <unordered_map>

namespace stagescope::model {

// Edges are few but interleave in file order: they are told apart by the interned Name's
// identity (a hash of a pointer), not by comparing strings per record.
std::vector<uint32_t> edgeRanks(const std::vector<events::TransferRecord>& transfers) {
  std::unordered_map<events::Name, uint32_t> rankOf;
  for (const auto& t : transfers) rankOf.emplace(t.edge, 0);
  std::vector<events::Name> distinct;
  distinct.reserve(rankOf.size());
  for (const auto& [edge, unused] : rankOf) distinct.push_back(edge);
  std::sort(distinct.begin(), distinct.end());  // by text
  for (size_t r = 0; r < distinct.size(); ++r) rankOf[distinct[r]] = static_cast<uint32_t>(r);
  std::vector<uint32_t> out;
  out.reserve(transfers.size());
  const events::Name* last = nullptr;
  uint32_t lastRank = 0;
  for (const auto& t : transfers) {
    if (!last || !(*last == t.edge)) {
      last = &t.edge;
      lastRank = rankOf.at(t.edge);
    }
    out.push_back(lastRank);
  }
  return out;
}

}  // namespace stagescope::model
