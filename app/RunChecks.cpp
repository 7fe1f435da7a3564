#include "app/RunChecks.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <set>

#include "app/report/CheckReport.h"
#include "core/plan/Config.h"
#include "storage/RunReader.h"

namespace stagescope::app {

int exitCodeFor(events::RunStatus status) {
  return status == events::RunStatus::Completed ? 0 : analysis::exit_code::kRunStatus;
}

analysis::RecordFilter recordFilterOf(const storage::RunModel& run) {
  analysis::RecordFilter f;
  if (run.info.configText.empty()) return f;
  try {
    const plan::RunConfig cfg = plan::parseConfig(run.info.configText, run.path);
    f.iterations = cfg.record.iterations;
    f.ranks = cfg.record.ranks;
    f.modules = cfg.record.modules;
  } catch (const std::exception&) {
    // A config that no longer parses (another version): judge the run unfiltered.
  }
  return f;
}

int checkRunFile(const std::string& path, const std::string& against, const CheckFiles& files) {
  try {
    // Payloads (level full) let the checks judge values, not norms.
    storage::LoadOptions load;
    load.payloads = true;
    storage::RunModel run = loadWithProgress(path, load);
    storage::RunModel other;
    analysis::CheckOptions opts;
    opts.tolerance = files.tolerance;
    opts.filter = recordFilterOf(run);
    if (!against.empty()) {
      other = loadWithProgress(against, load);
      opts.against = &other;
      opts.againstBitwise = files.bitwise;
      opts.againstFilter = recordFilterOf(other);
    }
    analysis::CheckReport rep = analysis::checkRun(run, opts);
    std::fputs(report::renderCheckText(rep).c_str(), stdout);
    if (!files.junit.empty()) report::writeJUnit(rep, files.junit);
    if (!files.json.empty()) report::writeCheckJson(rep, files.json);
    return rep.exitCode;
  } catch (const storage::RunFileError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return analysis::exit_code::kError;
  }
}

namespace {

// What one rank waited for, parsed from its timeout diagnosis (Communicator's sentence:
// "rank 3 waits for the activation of microbatch 5 from rank 2 (edge E, iteration I,
// action S KIND); gave up after T s: ...").
struct Wait {
  int rank = -1, peer = -1, iteration = -1, actionSeq = -1, microbatch = -1;
  std::string sentence;   // up to the closing parenthesis
  std::string direction;  // activation / gradient / "" (broadcast)
  bool send = false;
};

Wait parseWait(const events::DiagnosisRecord& d) {
  Wait w;
  w.rank = d.rank;
  w.peer = d.waitsOnRank;
  const size_t cut = d.message.find("; gave up");
  w.sentence = d.message.substr(0, cut);
  static const std::regex re(
      R"(waits (for|to send) the (activation|gradient) of microbatch (\d+) (?:from|to) rank (\d+) \(edge [^,]+, iteration (\d+), action (\d+))");
  std::smatch m;
  if (std::regex_search(w.sentence, m, re)) {
    w.send = m[1] == "to send";
    w.direction = m[2];
    w.microbatch = std::stoi(m[3]);
    w.iteration = std::stoi(m[5]);
    w.actionSeq = std::stoi(m[6]);
  }
  return w;
}

}  // namespace

HangAnalysis analyzeHang(const std::string& runPath) {
  HangAnalysis out;
  try {
    storage::RunModel run = storage::loadRun(runPath);
    std::map<int, Wait> waits;
    std::vector<const events::DiagnosisRecord*> faults;
    for (const auto& d : run.diagnoses) {
      if (d.kind == "timeout" && !waits.count(d.rank)) waits[d.rank] = parseWait(d);
      if (d.kind == "fault_injected") faults.push_back(&d);
      if (d.kind == "error" && out.erroredRank < 0) {
        out.erroredRank = d.rank;
        out.error = d.message;
      }
    }
    if (waits.empty()) {
      out.verdict = "no rank recorded what it waited for";
      out.text = "wait-for graph: " + out.verdict;
      return out;
    }
    auto lastDone = [&](int rank) -> std::string {
      if (rank < 0 || rank >= static_cast<int>(run.actions.size()) || run.actions[rank].empty()) {
        return "nothing completed";
      }
      const auto& a = run.actions[rank].back();
      return "last completed: iteration " + std::to_string(a.iteration) + " " +
             events::toString(a.kind) + " mb " + std::to_string(a.microbatch);
    };
    out.text = "wait-for graph:";
    for (const auto& [rank, w] : waits) {
      std::string line = w.sentence + "; " + lastDone(rank) + ".";
      out.text += "\n  " + line;
      events::DiagnosisRecord h;
      h.rank = rank;
      h.kind = "hang";
      h.iteration = w.iteration;
      h.actionSeq = w.actionSeq;
      h.waitsOnRank = w.peer;
      h.message = line;
      out.records.push_back(h);
    }
    // Follow the waits-on edges from every waiting rank: a repeated rank closes a cycle; a
    // rank that waits on nobody is the missing partner.
    std::set<std::vector<int>> cycles;
    std::set<int> missing;
    for (const auto& start : waits) {
      std::vector<int> path;
      int at = start.first;
      while (waits.count(at) && std::find(path.begin(), path.end(), at) == path.end()) {
        path.push_back(at);
        at = waits[at].peer;
      }
      if (waits.count(at)) {
        std::vector<int> cycle(std::find(path.begin(), path.end(), at), path.end());
        std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
        cycles.insert(cycle);
      } else {
        missing.insert(at);
      }
    }
    std::vector<std::pair<int, std::string>> verdicts;  // (rank it is about, sentence)
    for (const auto& cycle : cycles) {
      std::string chain;
      for (int r : cycle) chain += "rank " + std::to_string(r) + " -> ";
      chain += "rank " + std::to_string(cycle.front());
      verdicts.emplace_back(cycle.front(),
                            "cycle " + chain + ": each rank waits for the next, none can proceed");
    }
    for (int r : missing) {
      std::string why = "it waits on nobody (" + lastDone(r) + ")";
      for (const auto& d : run.diagnoses) {
        if (d.rank == r && d.kind == "error") {
          why = "it failed with an error (" + d.message + ")";
          break;
        }
      }
      verdicts.emplace_back(r, "rank " + std::to_string(r) + " is the missing partner: " + why +
                                   " and never posted the matching operation");
    }
    // A message that a fault dropped explains the wait on it.
    for (const auto& [rank, w] : waits) {
      if (w.send || w.microbatch < 0) continue;
      const std::string what = "the " + w.direction + " of microbatch " +
                               std::to_string(w.microbatch) + " to rank " + std::to_string(rank);
      for (const auto* f : faults) {
        if (f->rank == w.peer && f->iteration == w.iteration &&
            f->message.find(what + " ") != std::string::npos &&
            f->message.find("drop") != std::string::npos) {
          verdicts.emplace_back(w.peer, "rank " + std::to_string(w.peer) + " dropped " + what +
                                            " (fault injection): the message rank " +
                                            std::to_string(rank) + " waits for was never sent");
        }
      }
    }
    for (const auto& [about, v] : verdicts) {
      out.text += "\n  " + v + ".";
      events::DiagnosisRecord h;
      h.rank = about;
      h.kind = "hang";
      h.message = v + ".";
      out.records.push_back(h);
      out.verdict += (out.verdict.empty() ? "" : "; ") + v;
    }
    return out;
  } catch (const std::exception& e) {
    out.verdict = std::string("wait-for graph unavailable: ") + e.what();
    out.text = out.verdict;
    return out;
  }
}

std::string describeHang(const std::string& runPath) {
  return analyzeHang(runPath).text;
}

}  // namespace stagescope::app
