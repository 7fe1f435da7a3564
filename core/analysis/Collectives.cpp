#include "core/analysis/Collectives.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace stagescope::analysis {

const char* toString(CollectiveAgreement a) {
  switch (a) {
    case CollectiveAgreement::Agree:
      return "agree";
    case CollectiveAgreement::Differ:
      return "differ";
    case CollectiveAgreement::NotCompared:
      return "not compared (per-member results)";
    case CollectiveAgreement::NoChecksums:
      return "no checksums";
    case CollectiveAgreement::Incomplete:
      return "incomplete (a member has no row)";
  }
  return "?";
}

bool collectiveResultsShared(const std::string& op) {
  return op.rfind("all_reduce", 0) == 0 || op.rfind("all_gather", 0) == 0 || op == "broadcast";
}

namespace {

CollectiveAgreement agreementOf(const model::RunModel& run, const CollectiveInstance& c) {
  if (!c.complete()) return CollectiveAgreement::Incomplete;
  if (c.opMismatch) return CollectiveAgreement::Differ;
  if (!collectiveResultsShared(c.op)) return CollectiveAgreement::NotCompared;
  const auto& first = run.collectives[c.members.front()];
  for (size_t m : c.members) {
    const auto& r = run.collectives[m];
    // A checksum is recorded at level stats and above, for a completed member (0: none).
    if (r.outChecksum == 0 || r.state == "failed" || r.state == "pending")
      return CollectiveAgreement::NoChecksums;
  }
  for (size_t m : c.members) {
    if (run.collectives[m].outChecksum != first.outChecksum) return CollectiveAgreement::Differ;
  }
  return CollectiveAgreement::Agree;
}

}  // namespace

std::vector<CollectiveInstance> collectiveInstances(const model::RunModel& run) {
  // Two groups may share a name (one "dp" group per pipeline stage): their members tell them
  // apart.
  std::map<std::tuple<int32_t, std::string, std::vector<int32_t>, int32_t>, std::vector<size_t>>
      byKey;
  for (size_t i = 0; i < run.collectives.size(); ++i) {
    const auto& c = run.collectives[i];
    byKey[{c.iteration, c.group, c.groupRanks, c.groupSeq}].push_back(i);
  }
  std::vector<CollectiveInstance> out;
  out.reserve(byKey.size());
  for (auto& [key, members] : byKey) {
    std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      return run.collectives[a].rank < run.collectives[b].rank;
    });
    CollectiveInstance c;
    std::tie(c.iteration, c.group, c.groupRanks, c.groupSeq) = key;
    const auto& first = run.collectives[members.front()];
    c.op = first.op;
    c.groupSize = first.groupSize;
    c.firstStartNs = INT64_MAX;
    c.lastStartNs = INT64_MIN;
    bool allEnded = true;
    for (size_t m : members) {
      const auto& r = run.collectives[m];
      c.opMismatch = c.opMismatch || r.op != c.op;
      c.firstStartNs = std::min(c.firstStartNs, r.startNs);
      c.lastStartNs = std::max(c.lastStartNs, r.startNs);
      c.lastEndNs = std::max(c.lastEndNs, r.endNs);
      allEnded = allEnded && r.endNs != 0;
    }
    if (!allEnded) c.lastEndNs = 0;
    // A rank recorded twice for one identity (never by the backend) is not a second member.
    members.erase(std::unique(members.begin(), members.end(),
                              [&](size_t a, size_t b) {
                                return run.collectives[a].rank == run.collectives[b].rank;
                              }),
                  members.end());
    c.members = std::move(members);
    c.agreement = agreementOf(run, c);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace stagescope::analysis
