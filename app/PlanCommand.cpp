// `stagescope plan CONFIG`: validate, print every rank's action list, the counts and the
// expected bubble, and prove statically that the plan makes progress.
#include <cstdio>

#include "app/Commands.h"
#include "app/ErrorBoundary.h"
#include "core/plan/Config.h"
#include "core/plan/MemoryEstimate.h"
#include "core/plan/Plan.h"
#include "core/plan/Topology.h"

namespace stagescope::app {

int planCommand(const std::string& config, const std::vector<std::string>& overrides) {
  try {
    plan::RunConfig cfg = plan::loadConfig(config, overrides);
    plan::Topology topology(cfg);
    plan::Plan p = plan::makePlan(cfg, topology);
    std::fputs(plan::renderPlan(p, cfg).c_str(), stdout);
    const std::string stuck = plan::checkPlanProgress(p);
    if (!stuck.empty()) {
      std::fprintf(stderr, "plan check: DEADLOCK\n%s\n", stuck.c_str());
      return 2;
    }
    std::printf("plan check: ok (every send has its receive; all %d ranks run to completion)\n",
                p.worldSize);
    const plan::MemoryEstimate memory = plan::estimateMemory(cfg, p, plan::forkedRanksFor(cfg));
    std::fputs(plan::renderMemoryEstimate(memory).c_str(), stdout);
    const double available = plan::availableMemoryBytes();
    if (available >= 0) {
      std::printf(
          "memory available now: %s (MemAvailable)%s\n", plan::formatBytes(available).c_str(),
          memory.totalBytes() > available ? "; `stagescope run` refuses this without --force" : "");
    }
    return 0;
  } catch (const plan::ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", oneLine(e).c_str());
    return 2;
  }
}

}  // namespace stagescope::app
