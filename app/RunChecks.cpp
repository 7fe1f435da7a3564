#include "app/RunChecks.h"
#include "app/ErrorBoundary.h"
#include "app/RunLoading.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "app/report/CheckReport.h"
#include "core/analysis/HangGraph.h"
#include "core/events/Printable.h"
#include "core/plan/Config.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#include "storage/ShardWriter.h"

namespace stagescope::app {

int exitCodeFor(events::RunStatus status) {
  return status == events::RunStatus::Completed ? 0 : analysis::exit_code::kRunStatus;
}

int checkRunFile(const std::string& path, const std::string& against, const CheckFiles& files) {
  // A bad --plan config is refused (one line, exit 2) before the run is loaded.
  const std::string planText = files.plan.empty() ? "" : plan::readConfigFile(files.plan);
  if (!files.plan.empty()) (void)plan::parseConfig(planText, files.plan);
  try {
    // Payloads (level full) let the checks judge values, not norms.
    storage::LoadOptions load;
    load.payloads = true;
    model::RunModel run, other;
    model::LiveState live, otherLive;  // storage/RunLiveness.h
    if (against.empty()) {
      run = loadWithProgress(path, load, &live);
    } else {
      // The --against run is only compared (compareRuns): the gradients the comparison judges
      // are all it needs (LoadOptions::comparedGradients).
      storage::LoadOptions otherLoad = load;
      otherLoad.comparedGradients = true;
      std::tie(run, other) = loadTwoWithProgress(path, against, load, otherLoad, &live, &otherLive);
    }
    // A run being written is read as a snapshot: said in one line, and never judged finished.
    for (const auto& [p, l] : {std::pair{&path, &live}, std::pair{&against, &otherLive}}) {
      if (l->live())
        std::fprintf(stderr, "%s\n", events::printableLine(*p + ": " + l->line()).c_str());
    }
    analysis::CheckOptions opts;
    opts.tolerance = files.tolerance;
    opts.filter = analysis::recordFilterOf(run);
    opts.planConfigText = planText;
    opts.planConfigSource = files.plan;
    opts.live = live;
    if (!live.live() && (run.partial || run.info.status == events::RunStatus::Running) &&
        !storage::findShards(path).empty())
      opts.recover = "stagescope merge " + path;
    if (!against.empty()) {
      opts.against = &other;
      opts.againstBitwise = files.bitwise;
      opts.againstFilter = analysis::recordFilterOf(other);
    }
    analysis::CheckReport rep = analysis::checkRun(run, opts);
    // The report files first: one that cannot be written fails the command before the text
    // is printed, not after it.
    if (!files.junit.empty()) report::writeJUnit(rep, files.junit);
    if (!files.json.empty()) report::writeCheckJson(rep, files.json);
    std::fputs(report::renderCheckText(rep).c_str(), files.text);
    std::fflush(files.text);
    keepUntilExit(std::move(run));
    keepUntilExit(std::move(other));
    return rep.exitCode;
  } catch (const storage::RunFileError& e) {
    std::fprintf(stderr, "error: %s\n", oneLine(e).c_str());  // the path may hold escapes
    return analysis::exit_code::kError;
  }
}

size_t removeShardsOfCompletedRun(const std::string& run) {
  try {
    return storage::removeMergedShards(run).size();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::fprintf(stderr, "stagescope: the merged shards were kept: %s\n",
                 what.substr(0, what.find('\n')).c_str());
    return 0;
  }
}

HangAnalysis analyzeHang(const std::string& runPath) {
  HangAnalysis out;
  try {
    const analysis::WaitGraph g = analysis::waitForGraph(storage::loadRun(runPath));
    out.text = g.text();
    out.verdict = g.empty() ? "no rank recorded what it waited for" : g.verdict();
    out.headline = g.empty() ? out.verdict : g.headline();
    out.verdictCount = g.verdicts.size();
    out.remedy = g.remedy();
    out.erroredRank = g.erroredRank;
    out.error = g.error;
    for (const auto& e : g.edges) {
      events::DiagnosisRecord h;
      h.rank = e.rank;
      h.kind = events::DiagnosisKind::Hang;
      h.iteration = e.iteration;
      h.actionSeq = e.actionSeq;
      h.waitsOnRank = e.waitsOn;
      h.message = "rank " + std::to_string(e.rank) + " " + e.waiting() + "; " + e.lastDone + ".";
      out.records.push_back(h);
      out.waitSentence.emplace(e.rank, e.sentence());
    }
    for (const auto& v : g.verdicts) {
      events::DiagnosisRecord h;
      h.rank = v.aboutRank;
      h.kind = events::DiagnosisKind::Hang;
      h.message = v.sentence + ".";
      out.records.push_back(h);
    }
    if (!out.remedy.empty()) {  // about the root cause's rank, after its verdict
      events::DiagnosisRecord h;
      h.rank = g.verdicts.front().aboutRank;
      h.kind = events::DiagnosisKind::Hang;
      h.message = out.remedy + ".";
      out.records.push_back(h);
    }
  } catch (const std::exception& e) {
    out.verdict = std::string("wait-for graph unavailable: ") + e.what();
    out.text = out.headline = out.verdict;
  }
  return out;
}

void recordHangDiagnoses(const std::string& runPath, HangAnalysis& hang) {
  if (hang.records.empty()) return;
  try {
    const std::string shard = runPath + ".launcher.shard";
    auto writer = storage::ShardWriter::open(shard, events::RecordLevel::Meta, -1);
    for (auto& d : hang.records) writer->diagnosis(std::move(d));
    writer->close();
    storage::MergeResult m = storage::mergeShards(runPath, {shard});
    for (const auto& note : m.notes) std::fprintf(stderr, "merge: %s\n", note.c_str());
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::fprintf(stderr, "merge: the wait-for graph was not recorded: %s\n",
                 what.substr(0, what.find('\n')).c_str());
  }
}

}  // namespace stagescope::app
