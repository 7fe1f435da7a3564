// Rejects faults that match nothing in the plan (see FaultCheck.h).
#include "core/plan/FaultCheck.h"

#include <string>
#include <vector>

namespace stagescope::plan {
namespace {

std::string describe(const FaultConfig& f) {
  std::string s = toString(f.kind) + std::string(":iteration=") + std::to_string(f.iteration) +
                  ",microbatch=" + std::to_string(f.microbatch);
  if (f.rank >= 0) {
    s += ",rank=" + std::to_string(f.rank);
  } else {
    s += ",module=" + f.module + ",stage=" + std::to_string(f.stage);
  }
  return s + ",direction=" + events::toString(f.direction);
}

// The ranks a fault applies to, and how to name them in a message.
std::vector<int> targets(const FaultConfig& f, const RunConfig& c, const Plan& plan,
                         std::string* who) {
  std::vector<int> ranks;
  if (f.rank >= 0) {
    ranks.push_back(f.rank);
    *who = "rank " + std::to_string(f.rank);
    return ranks;
  }
  const ModuleConfig& m = c.module(f.module);
  const int stage = f.stage < 0 ? m.pp - 1 : f.stage;
  for (const RankPlan& rp : plan.ranks) {
    const RankStage* s = rp.stage(m.name);
    if (s && s->pp == stage) ranks.push_back(rp.rank);
  }
  *who =
      "module " + m.name + " stage " + std::to_string(stage) + (f.stage < 0 ? " (the last)" : "");
  return ranks;
}

// `module`: only that module's actions ("" = any).  `batchRows`: only a message a `shape`
// fault can change, one of more than one batch row (the fault sends one row less:
// engine/Faults.cpp; of a single row there is nothing to take away).
bool sends(const RankPlan& rp, events::Direction direction, int microbatch,
           const std::string& module = "", bool batchRows = false) {
  for (const Action& a : rp.actions) {
    if (!module.empty() && a.module != module) continue;
    for (const Message& msg : a.messages) {
      if (batchRows && (msg.shape.size() < 2 || msg.shape[1] <= 1)) continue;
      if (msg.side == events::Side::Send && msg.direction == direction &&
          msg.microbatch == microbatch) {
        return true;
      }
    }
  }
  return false;
}

bool computes(const RankPlan& rp, bool backward, int microbatch, const std::string& module = "") {
  const auto kind = backward ? events::ActionKind::Backward : events::ActionKind::Forward;
  for (const Action& a : rp.actions) {
    if (!module.empty() && a.module != module) continue;
    if (a.kind == kind && a.microbatch == microbatch) return true;
  }
  return false;
}

// The (module, stage) pairs that do send in `direction`, for the hint of the message.
std::string sendersHint(const Plan& plan, events::Direction direction, int microbatch) {
  std::string out;
  std::string last;
  for (const RankPlan& rp : plan.ranks) {
    for (const RankStage& s : rp.stages) {
      if (!sends(rp, direction, microbatch, s.module)) continue;
      const std::string item = s.module + " stage " + std::to_string(s.pp);
      if (item == last || out.find(item) != std::string::npos) continue;
      out += (out.empty() ? "" : ", ") + item;
      last = item;
    }
  }
  return out.empty() ? "none" : out;
}

}  // namespace

void checkFaultsCanFire(const RunConfig& config, const Plan& plan) {
  for (size_t i = 0; i < config.faults.size(); ++i) {
    const FaultConfig& f = config.faults[i];
    const std::string field = "faults[" + std::to_string(i) + "]";
    auto never = [&](const std::string& why) {
      throw ConfigError(field, config.sourceName + ": " + field + " = " + describe(f) +
                                   ": can never fire: " + why);
    };
    const bool gradient = f.direction == events::Direction::Gradient;
    if (gradient && config.forwardOnly) {
      never("forward_only = true computes and sends no gradient; expected direction = activation");
    }
    std::string who;
    const std::vector<int> ranks = targets(f, config, plan, &who);
    bool fires = false;
    for (int r : ranks) {
      if (r < 0 || r >= static_cast<int>(plan.ranks.size())) continue;
      const RankPlan& rp = plan.ranks[static_cast<size_t>(r)];
      const std::string module = f.rank >= 0 ? "" : f.module;  // a module's faults: its actions
      fires = fires || (f.kind == FaultKind::Kill ? computes(rp, gradient, f.microbatch, module)
                                                  : sends(rp, f.direction, f.microbatch, module,
                                                          f.kind == FaultKind::Shape));
    }
    if (fires) continue;
    const auto dir = f.direction;
    if (f.kind == FaultKind::Shape) {
      bool sendsAny = false;
      for (int r : ranks) {
        if (r >= 0 && r < static_cast<int>(plan.ranks.size()))
          sendsAny = sendsAny || sends(plan.ranks[static_cast<size_t>(r)], dir, f.microbatch,
                                       f.rank >= 0 ? "" : f.module);
      }
      if (sendsAny) {
        never(who + " sends its " + events::toString(f.direction) + " of microbatch " +
              std::to_string(f.microbatch) +
              " with a batch of 1 row, and a shape fault sends one row less (expected "
              "micro_batch_size >= 2)");
      }
    }
    if (f.kind == FaultKind::Kill) {
      never(who + " computes no " + (gradient ? "backward" : "forward") + " of microbatch " +
            std::to_string(f.microbatch));
    }
    never(who + " sends no " + events::toString(f.direction) +
          " (those that do: " + sendersHint(plan, dir, f.microbatch) + ")");
  }
}

}  // namespace stagescope::plan
