#include "core/analysis/MessageRoles.h"

#include <map>
#include <tuple>

#include "core/analysis/Pairing.h"

namespace stagescope::analysis {

namespace {

using Key = std::tuple<int32_t, int32_t, int32_t, events::Side>;  // rank, iteration, seq, side

std::string meaning(const events::MessageRoleRecord& r) {
  const bool send = r.side == events::Side::Send;
  return std::string(r.carries == events::Direction::Activation ? "an activation" : "a gradient") +
         (send ? " to the " : " from the ") + (r.peerIsNext ? "next" : "previous") + " stage";
}

std::string sideText(const events::TransferRecord& t, const events::MessageRoleRecord& r) {
  const bool send = t.side == events::Side::Send;
  return "rank " + std::to_string(t.rank) + (send ? " sent " : " received ") + meaning(r) + " (" +
         r.call + ")";
}

// Why the two sides of one message disagree, or with the plan; "" when they agree.
std::string disagreement(const events::MessageRoleRecord& s, const events::MessageRoleRecord& r) {
  if (s.carries != r.carries) return "crossed: the two sides mean different tensors";
  if (s.peerIsNext == r.peerIsNext) return "the two sides do not point at each other";
  const bool planned = (s.carries == events::Direction::Activation) == s.peerIsNext;
  if (!planned)
    return "not the plan's: activations go to the next stage, gradients to the previous";
  return "";
}

}  // namespace

RoleJudgement judgeMessageRoles(const model::RunModel& run) {
  RoleJudgement out;
  if (run.messageRoles.empty()) return out;
  std::map<Key, const events::MessageRoleRecord*> roles;
  for (const auto& r : run.messageRoles) roles[{r.rank, r.iteration, r.actionSeq, r.side}] = &r;
  auto roleOf = [&](const events::TransferRecord& t) -> const events::MessageRoleRecord* {
    auto it = roles.find({t.rank, t.iteration, t.actionSeq, t.side});
    return it == roles.end() ? nullptr : it->second;
  };
  std::vector<model::TransferPair> scratch;
  for (const auto& p : pairsOf(run, scratch)) {
    if (!p.complete()) continue;
    const auto& st = run.transfers[static_cast<size_t>(p.send)];
    const auto& rt = run.transfers[static_cast<size_t>(p.recv)];
    const auto* s = roleOf(st);
    const auto* r = roleOf(rt);
    if (!s || !r) {
      ++out.withoutRole;
      continue;
    }
    ++out.judged;
    if (std::string why = disagreement(*s, *r); !why.empty()) {
      out.mismatches.push_back({p.send, p.recv,
                                why + ": " + sideText(st, *s) + "; " + sideText(rt, *r) +
                                    " (edge " + std::string(st.edge) + ", iteration " +
                                    std::to_string(st.iteration) + ")"});
    }
  }
  return out;
}

}  // namespace stagescope::analysis
