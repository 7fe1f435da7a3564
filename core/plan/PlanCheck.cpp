// Static deadlock check of a plan: every rank posts the messages of its current action; the
// action completes once every peer has posted (or completed) the matching action.
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
struct Where {
  int rank;
  int action;
};

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

std::string checkPlanProgress(const Plan& plan) {
  const int n = static_cast<int>(plan.ranks.size());
  std::map<MessageKey, Where> posted;
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
    }
  }
  // Missing partners: a message no peer ever matches.
  for (int r = 0; r < n; ++r) {
    const auto& actions = plan.ranks[r].actions;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      for (const Message& m : actions[i].messages) {
        if (m.peer < 0 || m.peer >= n) continue;
        if (!posted.count(keyOf(r, m, true))) {
          problems << "rank " << r << " in " << describe(plan, r, i) << " would " << messageText(m)
                   << " with rank " << m.peer << ", but rank " << m.peer
                   << " has no matching action. ";
        }
      }
    }
  }
  if (!problems.str().empty()) return "plan is inconsistent: " + problems.str();

  // Simulate: advance every rank as far as its messages are matched.
  std::vector<int> pos(n, 0);
  bool progressed = true;
  while (progressed) {
    progressed = false;
    for (int r = 0; r < n; ++r) {
      const auto& actions = plan.ranks[r].actions;
      while (pos[r] < static_cast<int>(actions.size())) {
        bool ready = true;
        for (const Message& m : actions[pos[r]].messages) {
          const Where& w = posted.at(keyOf(r, m, true));
          if (pos[w.rank] < w.action) {
            ready = false;
            break;
          }
        }
        if (!ready) break;
        ++pos[r];
        progressed = true;
      }
    }
  }

  // Diagnose: each blocked rank, the first peer it waits on, and a wait-for cycle if any.
  std::vector<int> waitsOn(n, -1);
  std::ostringstream out;
  for (int r = 0; r < n; ++r) {
    const auto& actions = plan.ranks[r].actions;
    if (pos[r] >= static_cast<int>(actions.size())) continue;
    for (const Message& m : actions[pos[r]].messages) {
      const Where& w = posted.at(keyOf(r, m, true));
      if (pos[w.rank] < w.action) {
        waitsOn[r] = w.rank;
        out << "rank " << r << " waits in " << describe(plan, r, pos[r]) << " for rank " << w.rank
            << " (to " << messageText(m) << ", which rank " << w.rank << " posts in "
            << describe(plan, w.rank, w.action) << ", but rank " << w.rank << " is blocked in "
            << describe(plan, w.rank, pos[w.rank]) << "). ";
        break;
      }
    }
  }
  if (out.str().empty()) return "";
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
  return "plan deadlocks: " + out.str();
}

}  // namespace stagescope::plan
