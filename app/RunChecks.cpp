#include "app/RunChecks.h"

#include <cstdio>
#include <map>
#include <set>

#include "storage/RunReader.h"
#include "storage/report/Check.h"

namespace stagescope::app {

int exitCodeFor(events::RunStatus status) {
  return status == events::RunStatus::Completed ? 0 : report::exit_code::kRunStatus;
}

int checkRunFile(const std::string& path, const std::string& against, const CheckFiles& files) {
  try {
    storage::RunModel run = storage::loadRun(path);
    storage::RunModel other;
    report::CheckOptions opts;
    if (!against.empty()) {
      other = storage::loadRun(against);
      opts.against = &other;
      opts.againstBitwise = files.bitwise;
      opts.againstRelTol = files.tolerance;
    }
    report::CheckReport rep = report::checkRun(run, opts);
    std::fputs(report::renderCheckText(rep).c_str(), stdout);
    if (!files.junit.empty()) report::writeJUnit(rep, files.junit);
    if (!files.json.empty()) report::writeCheckJson(rep, files.json);
    return rep.exitCode;
  } catch (const storage::RunFileError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return report::exit_code::kError;
  }
}

std::string describeHang(const std::string& runPath) {
  try {
    storage::RunModel run = storage::loadRun(runPath);
    std::map<int, const events::DiagnosisRecord*> waits;
    for (const auto& d : run.diagnoses) {
      if (d.kind == "timeout" && !waits.count(d.rank)) waits[d.rank] = &d;
    }
    if (waits.empty()) return "no rank recorded what it waited for";
    std::string text = "wait-for graph:";
    for (const auto& [rank, d] : waits) {
      text += "\n  " + d->message;
      if (!run.actions.empty() && rank < static_cast<int>(run.actions.size()) &&
          !run.actions[rank].empty()) {
        const auto& last = run.actions[rank].back();
        text += " (last completed: iteration " + std::to_string(last.iteration) + " " +
                events::toString(last.kind) + " mb " + std::to_string(last.microbatch) + ")";
      }
    }
    // Follow waits-on edges from the lowest waiting rank to name a cycle or the missing partner.
    int start = waits.begin()->first, at = start;
    std::vector<int> path;
    std::set<int> seen;
    while (waits.count(at) && !seen.count(at)) {
      seen.insert(at);
      path.push_back(at);
      at = waits[at]->waitsOnRank;
    }
    std::string chain;
    for (int r : path) chain += std::to_string(r) + " -> ";
    chain += std::to_string(at);
    if (seen.count(at)) {
      text += "\n  cycle: " + chain + " (each rank waits for the next; none can proceed)";
    } else {
      text += "\n  chain: " + chain + "; rank " + std::to_string(at) +
              " is not waiting on anyone: it never posted the matching operation "
              "(a skipped send or an order that differs from the plan)";
    }
    return text;
  } catch (const std::exception& e) {
    return std::string("wait-for graph unavailable: ") + e.what();
  }
}

}  // namespace stagescope::app
