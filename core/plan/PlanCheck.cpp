// Static deadlock check of a plan: every rank posts the messages of its current action; the
// action completes once every peer has posted (or completed) the matching action, and every
// member of each of its boundary broadcasts has reached its matching broadcast.  This is
// rendezvous semantics: a send counts as complete only when its receiver got there.  The
// engine's sends complete lazily, so the engine can finish some plans this check rejects,
// but it never hangs on a plan this check accepts.  A message whose peer is the rank itself (the
// local hand-off between colocated stages) is buffered: the send never waits, the receive
// waits for the rank's own send, so a receive planned before its send is a deadlock.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/plan/Plan.h"

namespace stagescope::plan {
namespace {

// (edge, direction, microbatch, srcRank, dstRank, side) identifies one side of a message.
using MessageKey = std::tuple<std::string, int, int, int, int, int>;
// (group, root, direction, microbatch, peerModule, member rank) identifies one member's part
// in a boundary broadcast.
using BroadcastKey = std::tuple<std::string, int, int, int, std::string, int>;
struct Where {
  int rank;
  int action;
};

BroadcastKey keyOf(const Broadcast& b, int member) {
  return {b.groupName, b.root, static_cast<int>(b.direction), b.microbatch, b.peerModule, member};
}

MessageKey keyOf(int rank, const Message& m, bool opposite) {
  int src = m.side == events::Side::Send ? rank : m.peer;
  int dst = m.side == events::Side::Send ? m.peer : rank;
  int side = static_cast<int>(m.side);
  if (opposite) side = 1 - side;
  return {m.edge, static_cast<int>(m.direction), m.microbatch, src, dst, side};
}

std::string describe(const Plan& plan, int rank, int index) {
  const auto& actions = plan.ranks[rank].actions;
  if (index >= static_cast<int>(actions.size())) return "its end";
  const Action& a = actions[index];
  std::string text = events::toString(a.kind);
  if (a.microbatch >= 0) text += " mb " + std::to_string(a.microbatch);
  if (a.gradMicrobatch >= 0) text += " (gradient mb " + std::to_string(a.gradMicrobatch) + ")";
  return text + " (seq " + std::to_string(index) + ")";
}

std::string messageText(const Message& m) {
  return std::string(m.side == events::Side::Send ? "send " : "recv ") +
         events::toString(m.direction) + " mb " + std::to_string(m.microbatch) + " on " + m.edge;
}

}  // namespace

PlanProgress analyzePlanProgress(const Plan& plan) {
  const int n = static_cast<int>(plan.ranks.size());
  PlanProgress result;
  std::map<MessageKey, Where> posted;
  std::map<BroadcastKey, Where> joined;
  std::ostringstream problems;
  for (int r = 0; r < n; ++r) {
    const auto& actions = plan.ranks[r].actions;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      for (const Message& m : actions[i].messages) {
        if (m.peer < 0 || m.peer >= n) {
          problems << "rank " << r << " in " << describe(plan, r, i) << " has peer " << m.peer
                   << " outside the world (" << n << " ranks). ";
          continue;
        }
        if (!posted.emplace(keyOf(r, m, false), Where{r, i}).second) {
          problems << "rank " << r << " posts " << messageText(m) << " with rank " << m.peer
                   << " twice (again in " << describe(plan, r, i) << "). ";
        }
      }
      for (const Broadcast& b : actions[i].broadcasts) {
        if (!joined.emplace(keyOf(b, r), Where{r, i}).second) {
          problems << "rank " << r << " joins the " << events::toString(b.direction)
                   << " broadcast of microbatch " << b.microbatch << " from rank " << b.root
                   << " twice (again in " << describe(plan, r, i) << "). ";
        }
      }
    }
  }
  // Missing partners: a message no peer ever matches, a broadcast a member never joins.
  for (int r = 0; r < n; ++r) {
    const auto& actions = plan.ranks[r].actions;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      for (const Message& m : actions[i].messages) {
        if (m.peer < 0 || m.peer >= n) continue;
        if (!posted.count(keyOf(r, m, true))) {
          problems << "rank " << r << " in " << describe(plan, r, i) << " would " << messageText(m)
                   << " with rank " << m.peer << ", but rank " << m.peer
                   << " has no matching action. ";
          result.blocked.push_back({r, i, m.peer, false, m});
        }
      }
      for (const Broadcast& b : actions[i].broadcasts) {
        for (int member : b.ranks) {
          if (member == r || joined.count(keyOf(b, member))) continue;
          problems << "rank " << r << " in " << describe(plan, r, i) << " would join the "
                   << events::toString(b.direction) << " broadcast of microbatch " << b.microbatch
                   << " from rank " << b.root << ", but rank " << member
                   << " has no matching action. ";
          Message what;
          what.direction = b.direction;
          what.microbatch = b.microbatch;
          what.peer = b.root;
          result.blocked.push_back({r, i, member, true, what});
        }
      }
    }
  }
  if (!problems.str().empty()) {
    result.ok = false;
    result.text = "plan is inconsistent: " + problems.str();
    return result;
  }

  // Simulate: advance every rank as far as its messages and broadcasts are matched.  For
  // the first unmatched partner of an action, `waitOf` returns the rank and its Where.
  std::vector<int> pos(n, 0);
  auto firstWait = [&](int r, BlockedRank* out, Where* where) {
    const Action& a = plan.ranks[r].actions[pos[r]];
    // Receives first: within an action the engine blocks on its receives (its sends
    // complete lazily), so that is the wait to report when both are unmatched.
    for (const auto side : {events::Side::Recv, events::Side::Send}) {
      for (const Message& m : a.messages) {
        if (m.side != side) continue;
        // A local hand-off (peer == this rank) is buffered: its send completes at once; its
        // receive waits, like any other, until the rank itself has posted the send.
        if (m.peer == r && m.side == events::Side::Send) continue;
        const Where& w = posted.at(keyOf(r, m, true));
        if (pos[w.rank] < w.action) {
          if (out) *out = {r, pos[r], w.rank, false, m};
          if (where) *where = w;
          return true;
        }
      }
    }
    for (const Broadcast& b : a.broadcasts) {
      for (int member : b.ranks) {
        if (member == r) continue;
        const Where& w = joined.at(keyOf(b, member));
        if (pos[w.rank] < w.action) {
          if (out) {
            Message what;
            what.direction = b.direction;
            what.microbatch = b.microbatch;
            what.peer = b.root;
            *out = {r, pos[r], w.rank, true, what};
          }
          if (where) *where = w;
          return true;
        }
      }
    }
    return false;
  };
  bool progressed = true;
  while (progressed) {
    progressed = false;
    for (int r = 0; r < n; ++r) {
      const auto& actions = plan.ranks[r].actions;
      while (pos[r] < static_cast<int>(actions.size()) && !firstWait(r, nullptr, nullptr)) {
        ++pos[r];
        progressed = true;
      }
    }
  }

  // Diagnose: each blocked rank, the first peer it waits on, and a wait-for cycle if any.
  std::vector<int> waitsOn(n, -1);
  std::ostringstream out;
  for (int r = 0; r < n; ++r) {
    if (pos[r] >= static_cast<int>(plan.ranks[r].actions.size())) continue;
    BlockedRank b;
    Where w{-1, -1};
    firstWait(r, &b, &w);
    result.blocked.push_back(b);
    waitsOn[r] = b.waitsOn;
    if (b.broadcast) {
      out << "rank " << r << " waits in " << describe(plan, r, pos[r]) << " for rank " << b.waitsOn
          << " (to join the " << events::toString(b.message.direction)
          << " broadcast of microbatch " << b.message.microbatch << " from rank " << b.message.peer
          << ", which rank " << b.waitsOn << " joins in " << describe(plan, b.waitsOn, w.action)
          << ", but rank " << b.waitsOn << " is blocked in "
          << describe(plan, b.waitsOn, pos[b.waitsOn]) << "). ";
      continue;
    }
    out << "rank " << r << " waits in " << describe(plan, r, pos[r]) << " for rank " << w.rank
        << " (to " << messageText(b.message) << ", which rank " << w.rank << " posts in "
        << describe(plan, w.rank, w.action) << ", but rank " << w.rank << " is blocked in "
        << describe(plan, w.rank, pos[w.rank]) << "). ";
  }
  if (out.str().empty()) return result;
  for (int start = 0; start < n; ++start) {
    if (waitsOn[start] < 0) continue;
    std::vector<int> path;
    std::set<int> seen;
    int r = start;
    while (r >= 0 && !seen.count(r)) {
      seen.insert(r);
      path.push_back(r);
      r = waitsOn[r];
    }
    if (r >= 0) {
      std::string cycle;
      auto it = std::find(path.begin(), path.end(), r);
      for (; it != path.end(); ++it) cycle += std::to_string(*it) + " -> ";
      out << "Wait-for cycle: " << cycle << r << ".";
      break;
    }
  }
  result.ok = false;
  result.text = "plan deadlocks: " + out.str();
  return result;
}

std::string checkPlanProgress(const Plan& plan) {
  return analyzePlanProgress(plan).text;
}

}  // namespace stagescope::plan
