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

// A boundary broadcast as BlockedRank reports it: its direction and microbatch, its root as the
// peer.
Message broadcastAsMessage(const Broadcast& b) {
  Message what;
  what.direction = b.direction;
  what.microbatch = b.microbatch;
  what.peer = b.root;
  return what;
}

// What analyzePlanProgress's steps share: the plan, where each side of each message and each
// member's part in each boundary broadcast is posted, and how far each rank got (`pos`: the index
// of the action it is at; its action count once it finished).
struct ProgressState {
  const Plan& plan;
  const int n;  // ranks
  std::map<MessageKey, Where> posted{};
  std::map<BroadcastKey, Where> joined{};
  std::vector<int> pos{};
};

// Indexes every message side and broadcast part the plan posts; a peer outside the world and a
// part posted twice are problems (sentences appended to `problems`).
void indexPosts(ProgressState& s, std::ostringstream& problems) {
  const Plan& plan = s.plan;
  const int n = s.n;
  for (int r = 0; r < n; ++r) {
    const auto& actions = plan.ranks[r].actions;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      for (const Message& m : actions[i].messages) {
        if (m.peer < 0 || m.peer >= n) {
          problems << "rank " << r << " in " << describe(plan, r, i) << " has peer " << m.peer
                   << " outside the world (" << n << " ranks). ";
          continue;
        }
        if (!s.posted.emplace(keyOf(r, m, false), Where{r, i}).second) {
          problems << "rank " << r << " posts " << messageText(m) << " with rank " << m.peer
                   << " twice (again in " << describe(plan, r, i) << "). ";
        }
      }
      for (const Broadcast& b : actions[i].broadcasts) {
        if (!s.joined.emplace(keyOf(b, r), Where{r, i}).second) {
          problems << "rank " << r << " joins the " << events::toString(b.direction)
                   << " broadcast of microbatch " << b.microbatch << " from rank " << b.root
                   << " twice (again in " << describe(plan, r, i) << "). ";
        }
      }
    }
  }
}

// Missing partners: a message no peer ever matches, a broadcast a member never joins; each a
// problem and a blocked rank.
void findMissingPartners(const ProgressState& s, std::ostringstream& problems,
                         PlanProgress& result) {
  const Plan& plan = s.plan;
  const int n = s.n;
  for (int r = 0; r < n; ++r) {
    const auto& actions = plan.ranks[r].actions;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      for (const Message& m : actions[i].messages) {
        if (m.peer < 0 || m.peer >= n) continue;
        if (!s.posted.count(keyOf(r, m, true))) {
          problems << "rank " << r << " in " << describe(plan, r, i) << " would " << messageText(m)
                   << " with rank " << m.peer << ", but rank " << m.peer
                   << " has no matching action. ";
          result.blocked.push_back({r, i, m.peer, false, m});
        }
      }
      for (const Broadcast& b : actions[i].broadcasts) {
        for (int member : b.ranks) {
          if (member == r || s.joined.count(keyOf(b, member))) continue;
          problems << "rank " << r << " in " << describe(plan, r, i) << " would join the "
                   << events::toString(b.direction) << " broadcast of microbatch " << b.microbatch
                   << " from rank " << b.root << ", but rank " << member
                   << " has no matching action. ";
          result.blocked.push_back({r, i, member, true, broadcastAsMessage(b)});
        }
      }
    }
  }
}

// Whether rank r's current action waits for a partner that has not reached its matching action;
// if so, the first such partner as a BlockedRank (`out`) and where it posts (`where`), each when
// not null.
bool firstWait(const ProgressState& s, int r, BlockedRank* out, Where* where) {
  const auto& pos = s.pos;
  const Action& a = s.plan.ranks[r].actions[pos[r]];
  // Receives first: within an action the engine blocks on its receives (its sends
  // complete lazily), so that is the wait to report when both are unmatched.
  for (const auto side : {events::Side::Recv, events::Side::Send}) {
    for (const Message& m : a.messages) {
      if (m.side != side) continue;
      // A local hand-off (peer == this rank) is buffered: its send completes at once; its
      // receive waits, like any other, until the rank itself has posted the send.
      if (m.peer == r && m.side == events::Side::Send) continue;
      const Where& w = s.posted.at(keyOf(r, m, true));
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
      const Where& w = s.joined.at(keyOf(b, member));
      if (pos[w.rank] < w.action) {
        if (out) *out = {r, pos[r], w.rank, true, broadcastAsMessage(b)};
        if (where) *where = w;
        return true;
      }
    }
  }
  return false;
}

// Simulate: advance every rank as far as its messages and broadcasts are matched.
void simulate(ProgressState& s) {
  s.pos.assign(s.n, 0);
  bool progressed = true;
  while (progressed) {
    progressed = false;
    for (int r = 0; r < s.n; ++r) {
      const auto& actions = s.plan.ranks[r].actions;
      while (s.pos[r] < static_cast<int>(actions.size()) && !firstWait(s, r, nullptr, nullptr)) {
        ++s.pos[r];
        progressed = true;
      }
    }
  }
}

// Each blocked rank and the first peer it waits on: a blocked rank in `result`, a sentence in
// `out`; returns whom each rank waits on (-1: nobody).
std::vector<int> describeBlocked(const ProgressState& s, PlanProgress& result,
                                 std::ostringstream& out) {
  const Plan& plan = s.plan;
  const auto& pos = s.pos;
  std::vector<int> waitsOn(s.n, -1);
  for (int r = 0; r < s.n; ++r) {
    if (pos[r] >= static_cast<int>(plan.ranks[r].actions.size())) continue;
    BlockedRank b;
    Where w{-1, -1};
    firstWait(s, r, &b, &w);
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
  return waitsOn;
}

// The first wait-for cycle, following `waitsOn` from each rank in order: a sentence in `out`.
void describeWaitCycle(const std::vector<int>& waitsOn, std::ostringstream& out) {
  const int n = static_cast<int>(waitsOn.size());
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
}

}  // namespace

PlanProgress analyzePlanProgress(const Plan& plan) {
  PlanProgress result;
  ProgressState s{plan, static_cast<int>(plan.ranks.size())};
  std::ostringstream problems;
  indexPosts(s, problems);
  findMissingPartners(s, problems, result);
  if (!problems.str().empty()) {
    result.ok = false;
    result.text = "plan is inconsistent: " + problems.str();
    return result;
  }
  simulate(s);
  // Diagnose: each blocked rank, the first peer it waits on, and a wait-for cycle if any.
  std::ostringstream out;
  const std::vector<int> waitsOn = describeBlocked(s, result, out);
  if (out.str().empty()) return result;
  describeWaitCycle(waitsOn, out);
  result.ok = false;
  result.text = "plan deadlocks: " + out.str();
  return result;
}

std::string checkPlanProgress(const Plan& plan) {
  return analyzePlanProgress(plan).text;
}

}  // namespace stagescope::plan
