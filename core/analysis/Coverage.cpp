#include "core/analysis/Coverage.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/events/CapturedLayout.h"

#include "core/analysis/Pairing.h"

namespace stagescope::analysis {

using events::ActionKind;
using events::ActionRecord;
using model::RunModel;

PlannedMessages messagesOf(const ActionRecord& p) {
  PlannedMessages m;
  // A one-direction action lists a peer once per message: two colocated encoders whose bridge
  // leaders share a rank send the llm's leader two messages from that rank.  A combined
  // action lists the peer of its two directions.
  const auto all = static_cast<int64_t>(p.peers.size());
  // Distinct peers (only the combined kinds need them; computed without allocating: peers
  // lists are short).
  auto distinct = [&p] {
    int64_t n = 0;
    for (size_t i = 0; i < p.peers.size(); ++i)
      n += std::find(p.peers.begin(), p.peers.begin() + static_cast<std::ptrdiff_t>(i),
                     p.peers[i]) == p.peers.begin() + static_cast<std::ptrdiff_t>(i);
    return n;
  };
  switch (p.kind) {
    case ActionKind::SendForward:
      m.activationSends = all;
      break;
    case ActionKind::RecvForward:
      m.activationRecvs = all;
      break;
    case ActionKind::SendBackward:
      m.gradientSends = all;
      break;
    case ActionKind::RecvBackward:
      m.gradientRecvs = all;
      break;
    case ActionKind::SendForwardRecvBackward:
      m.activationSends = distinct();
      m.gradientRecvs = m.activationSends;
      break;
    case ActionKind::SendBackwardRecvForward:
      m.gradientSends = distinct();
      m.activationRecvs = m.gradientSends;
      break;
    default:
      break;
  }
  return m;
}

std::string RunCoverage::summary() const {
  std::ostringstream o;
  o << "status " << status << "; " << iterationsRecorded << " of " << iterationsPlanned
    << " iterations, " << actionsRecorded << " of " << actionsExpected << " actions, "
    << messagesRecorded << " of " << messagesExpected << " message sides recorded";
  if (copiesExpected > 0)
    o << ", " << copiesRecorded << " of " << copiesExpected << " reduced-gradient copies";
  if (filter.any())
    o << " (" << filter.describe() << "; " << skippedByFilter << " planned "
      << "actions not recorded by design)";
  return o.str();
}

std::string CopyCoverage::summary() const {
  return std::to_string(recorded) + " of " + std::to_string(expected) +
         " expected reduced-gradient copies recorded (every DP replica of every TP shard, per "
         "iteration)";
}

CopyCoverage reducedCopyCoverage(const RunModel& run, const RecordFilter& filter) {
  CopyCoverage c;
  if (run.info.captured()) return c;
  // A shard: (module, param, tp, pp) -- the part of the parameter a TP rank of a pipeline stage
  // holds, whatever its partition says (a swapped partition is a wrong value, judged elsewhere,
  // not a missing record); a copy of it: a rank of that (module, tp, pp).
  using Shard = std::tuple<std::string, std::string, int, int>;
  std::set<Shard> shards;
  std::set<std::tuple<int, int, std::string, std::string>> recorded;
  for (const auto& g : run.gradients) {
    if (g.phase != events::GradPhase::Reduced) continue;
    shards.insert({g.module.str(), g.param.str(), g.tp, g.pp});
    recorded.insert({g.iteration, g.rank, g.module.str(), g.param.str()});
  }
  if (shards.empty()) return c;
  std::map<std::tuple<std::string, int, int>, std::vector<const events::RankInfo*>> replicas;
  for (const auto& r : run.ranks) replicas[{r.module, r.tp, r.pp}].push_back(&r);
  const int iterations = std::max(run.info.iterations, 0);
  for (const auto& [module, param, tp, pp] : shards) {
    const auto it = replicas.find({module, tp, pp});
    if (it == replicas.end()) continue;
    for (int i = 0; i < iterations; ++i) {
      for (const auto* r : it->second) {
        if (!filter.wants(i, module, r->rank)) continue;
        ++c.expected;
        if (recorded.count({i, r->rank, module, param})) {
          ++c.recorded;
        } else if (c.missing.size() < 3) {
          std::ostringstream m;
          m << "reduced gradient " << param << " iteration " << i << ": no copy from rank "
            << r->rank << " (" << module << " dp" << r->dp << " tp" << r->tp << " pp" << r->pp
            << "); every DP replica records its own copy";
          c.missing.push_back(m.str());
        }
      }
    }
  }
  return c;
}

RunCoverage coverageOf(const RunModel& run, const RecordFilter& filter) {
  RunCoverage c;
  c.filter = filter;
  c.status = toString(run.info.status);
  if (run.partial) c.status += ", partial file";
  c.completed = run.info.status == events::RunStatus::Completed && !run.partial;
  const int iterations = std::max(run.info.iterations, 0);
  const size_t nRanks = std::max(
      {run.plan.size(), run.actions.size(), static_cast<size_t>(std::max(run.info.worldSize, 0))});
  // An iteration counts as recorded when every rank that should record it did all of it.
  std::vector<int> iterationOk(static_cast<size_t>(iterations), 1);
  std::vector<int> iterationWanted(static_cast<size_t>(iterations), 0);
  // Recorded message sides per (rank, iteration), bucketed by rank once (a counting sort) so
  // that the per-rank pass below is linear: transfers outside [0, nRanks) x [0, iterations)
  // are never looked up.
  std::vector<size_t> rankStart(nRanks + 1, 0);
  auto counted = [&](const events::TransferRecord& t) {
    return t.rank >= 0 && static_cast<size_t>(t.rank) < nRanks && t.iteration >= 0 &&
           t.iteration < iterations;
  };
  for (const auto& t : run.transfers)
    if (counted(t)) ++rankStart[static_cast<size_t>(t.rank) + 1];
  for (size_t r = 0; r < nRanks; ++r) rankStart[r + 1] += rankStart[r];
  std::vector<int32_t> sideIterations(rankStart[nRanks]);
  {
    std::vector<size_t> fill(rankStart.begin(), rankStart.end() - 1);
    for (const auto& t : run.transfers)
      if (counted(t)) sideIterations[fill[static_cast<size_t>(t.rank)]++] = t.iteration;
  }
  // Per iteration of the rank in hand: planned actions, the message sides they imply,
  // recorded actions and recorded message sides.
  const auto nIt = static_cast<size_t>(iterations);
  std::vector<int64_t> plannedN(nIt), plannedMessages(nIt), doneN(nIt), sidesN(nIt);
  for (size_t r = 0; r < nRanks; ++r) {
    const int rank = static_cast<int>(r);
    const std::string module = run.moduleLabel(rank);
    static const std::vector<ActionRecord> kNone;
    const auto& plan = r < run.plan.size() ? run.plan[r] : kNone;
    const auto& done = r < run.actions.size() ? run.actions[r] : kNone;
    const bool planOnce =
        !plan.empty() && plan.front().iteration == plan.back().iteration && iterations > 1;
    std::fill(plannedN.begin(), plannedN.end(), 0);
    std::fill(plannedMessages.begin(), plannedMessages.end(), 0);
    std::fill(doneN.begin(), doneN.end(), 0);
    std::fill(sidesN.begin(), sidesN.end(), 0);
    if (planOnce) {  // the one stored iteration stands for every iteration
      int64_t messages = 0;
      for (const auto& p : plan) messages += messagesOf(p).total();
      std::fill(plannedN.begin(), plannedN.end(), static_cast<int64_t>(plan.size()));
      std::fill(plannedMessages.begin(), plannedMessages.end(), messages);
    } else {
      for (const auto& p : plan) {
        if (p.iteration < 0 || p.iteration >= iterations) continue;
        ++plannedN[static_cast<size_t>(p.iteration)];
        plannedMessages[static_cast<size_t>(p.iteration)] += messagesOf(p).total();
      }
    }
    for (const auto& a : done)
      if (a.iteration >= 0 && a.iteration < iterations) ++doneN[static_cast<size_t>(a.iteration)];
    for (size_t k = rankStart[r]; k < rankStart[r + 1]; ++k)
      ++sidesN[static_cast<size_t>(sideIterations[k])];
    int reported = 0;
    for (int it = 0; it < iterations; ++it) {
      const auto i = static_cast<size_t>(it);
      const int64_t planned = plannedN[i];
      if (!filter.wantsRankOf(run, it, rank)) {
        c.skippedByFilter += planned;
        continue;
      }
      iterationWanted[i] = 1;
      const int64_t doneHere = doneN[i];
      const int64_t messages = plannedMessages[i];
      c.actionsExpected += planned;
      c.actionsRecorded += std::min<int64_t>(doneHere, planned);
      c.messagesExpected += messages;
      const int64_t sides = sidesN[i];
      c.messagesRecorded += std::min(sides, messages);
      const bool ok = doneHere >= planned && sides >= messages;
      if (!ok) {
        iterationOk[i] = 0;
        if (reported++ < 2) {
          std::ostringstream m;
          m << "rank " << rank << (module.empty() ? "" : " (" + module + ")") << " iteration " << it
            << ": " << doneHere << " of " << planned << " planned actions and " << sides << " of "
            << messages << " message sides recorded";
          c.missing.push_back(m.str());
        }
      }
    }
  }
  c.iterationsRecorded = 0;
  int wanted = 0;
  for (int it = 0; it < iterations; ++it) {
    if (!iterationWanted[static_cast<size_t>(it)]) continue;
    ++wanted;
    c.iterationsRecorded += iterationOk[static_cast<size_t>(it)];
  }
  c.iterationsPlanned = wanted;
  {
    CopyCoverage copies = reducedCopyCoverage(run, filter);
    c.copiesExpected = copies.expected;
    c.copiesRecorded = copies.recorded;
    for (auto& m : copies.missing) c.missing.push_back(std::move(m));
    if (copies.missingCount() > static_cast<int64_t>(copies.missing.size()))
      c.missing.push_back(
          std::to_string(copies.missingCount() - static_cast<int64_t>(copies.missing.size())) +
          " more reduced-gradient copies missing");
  }
  if (!c.completed) {
    c.missing.insert(c.missing.begin(),
                     "the run did not complete (status " + c.status +
                         (run.info.statusReason.empty() ? "" : ": " + run.info.statusReason) + ")");
  }
  return c;
}

}  // namespace stagescope::analysis
