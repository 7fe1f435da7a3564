#include "core/analysis/Coverage.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

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
  std::set<int> peers(p.peers.begin(), p.peers.end());
  const auto n = static_cast<int64_t>(peers.size());
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
      m.activationSends = n;
      m.gradientRecvs = n;
      break;
    case ActionKind::SendBackwardRecvForward:
      m.gradientSends = n;
      m.activationRecvs = n;
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
  if (filter.any())
    o << " (" << filter.describe() << "; " << skippedByFilter << " planned "
      << "actions not recorded by design)";
  return o.str();
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
  std::map<std::pair<int, int>, int64_t> recordedSides;  // (rank, iteration) -> transfer sides
  for (const auto& t : run.transfers) recordedSides[{t.rank, t.iteration}]++;
  for (size_t r = 0; r < nRanks; ++r) {
    const int rank = static_cast<int>(r);
    const std::string module = run.moduleLabel(rank);
    static const std::vector<ActionRecord> kNone;
    const auto& plan = r < run.plan.size() ? run.plan[r] : kNone;
    const auto& done = r < run.actions.size() ? run.actions[r] : kNone;
    const bool planOnce =
        !plan.empty() && plan.front().iteration == plan.back().iteration && iterations > 1;
    int reported = 0;
    for (int it = 0; it < iterations; ++it) {
      // The planned actions of this rank and iteration.
      std::vector<const ActionRecord*> planned;
      for (const auto& p : plan) {
        if (planOnce || p.iteration == it) planned.push_back(&p);
      }
      if (!filter.wantsRankOf(run, it, rank)) {
        c.skippedByFilter += static_cast<int64_t>(planned.size());
        continue;
      }
      iterationWanted[static_cast<size_t>(it)] = 1;
      int64_t doneHere = 0;
      for (const auto& a : done) doneHere += a.iteration == it;
      int64_t messages = 0;
      for (const auto* p : planned) messages += messagesOf(*p).total();
      c.actionsExpected += static_cast<int64_t>(planned.size());
      c.actionsRecorded += std::min<int64_t>(doneHere, static_cast<int64_t>(planned.size()));
      c.messagesExpected += messages;
      auto sides = recordedSides.count({rank, it}) ? recordedSides[{rank, it}] : 0;
      c.messagesRecorded += std::min(sides, messages);
      const bool ok = doneHere >= static_cast<int64_t>(planned.size()) && sides >= messages;
      if (!ok) {
        iterationOk[static_cast<size_t>(it)] = 0;
        if (reported++ < 2) {
          std::ostringstream m;
          m << "rank " << rank << (module.empty() ? "" : " (" + module + ")") << " iteration " << it
            << ": " << doneHere << " of " << planned.size() << " planned actions and " << sides
            << " of " << messages << " message sides recorded";
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
  if (!c.completed) {
    c.missing.insert(c.missing.begin(),
                     "the run did not complete (status " + c.status +
                         (run.info.statusReason.empty() ? "" : ": " + run.info.statusReason) + ")");
  }
  return c;
}

}  // namespace stagescope::analysis
