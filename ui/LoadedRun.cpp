#include "ui/LoadedRun.h"

#include "storage/RunLiveness.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <numeric>

#include "storage/RunReader.h"
#include "ui/TimeIndex.h"

namespace stagescope::ui {

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The indexes of the timeline: everything but the verdicts (problems), which need the details.
std::shared_ptr<LoadedRun> indexTimeline(model::RunModel model) {
  auto t0 = std::chrono::steady_clock::now();
  auto run = std::make_shared<LoadedRun>();
  run->model = std::move(model);
  const auto& m = run->model;
  run->rows = orderRankRows(m);
  run->rowOfRank = rowOfRank(run->rows, static_cast<int>(m.actions.size()));
  run->pairActions = pairActions(m);
  // The replay order (~1 s of one core at 10^7 actions) is built on a thread of its own while
  // this one builds the other indexes: nothing else is read or written by both.  The future
  // waits for it on every path (an exception here included) and hands on what it throws.
  auto replay = std::async(
      std::launch::async, [&m, &pairs = run->pairActions] { return ReplayOrder::build(m, pairs); });
  run->transferPair.assign(m.transfers.size(), -1);
  for (size_t i = 0; i < m.pairs.size(); ++i) {
    if (m.pairs[i].send >= 0) run->transferPair[m.pairs[i].send] = static_cast<int32_t>(i);
    if (m.pairs[i].recv >= 0) run->transferPair[m.pairs[i].recv] = static_cast<int32_t>(i);
  }
  std::vector<std::pair<int64_t, int32_t>> bySend;
  for (size_t i = 0; i < run->pairActions.size(); ++i) {
    const auto& p = run->pairActions[i];
    if (p.sendAction < 0 || p.recvAction < 0) continue;
    bySend.emplace_back(m.actions[p.sendRank][p.sendAction].startNs, static_cast<int32_t>(i));
  }
  std::sort(bySend.begin(), bySend.end());
  for (const auto& [t, i] : bySend) {
    run->pairSendStart.push_back(t);
    run->pairsBySendStart.push_back(i);
  }
  run->time = analysis::timeBreakdown(m);
  run->collectives = indexCollectives(m);
  run->iterationStartNs.assign(std::max(0, m.info.iterations), INT64_MAX);
  for (const auto& acts : m.actions)
    for (const auto& a : acts) {
      if (a.iteration < 0) continue;
      if (a.iteration >= static_cast<int>(run->iterationStartNs.size()))
        run->iterationStartNs.resize(a.iteration + 1, INT64_MAX);
      run->iterationStartNs[a.iteration] = std::min(run->iterationStartNs[a.iteration], a.startNs);
    }
  run->actionTimes.reserve(m.actions.size());
  for (const auto& acts : m.actions) run->actionTimes.push_back(timeColumns(acts));
  run->replay = replay.get();
  run->indexSeconds = since(t0);
  return run;
}

}  // namespace

std::shared_ptr<LoadedRun> indexRun(model::RunModel model) {
  auto run = indexTimeline(std::move(model));
  completeDetails(*run, judgeRun(*run));
  return run;
}

std::shared_ptr<LoadedRun> openRun(const std::string& path,
                                   const std::function<void(float)>& progress) {
  auto half = [&](float offset) {
    return [&progress, offset](float f) {
      if (progress) progress(offset + 0.5f * f);
    };
  };
  auto run = openTimeline(path, half(0));
  auto t0 = std::chrono::steady_clock::now();
  mergeDetails(*run, loadDetails(*run, half(0.5f)));
  completeDetails(*run, judgeRun(*run));
  run->detailsSeconds = since(t0);
  if (progress) progress(1.0f);
  return run;
}

std::shared_ptr<LoadedRun> openTimeline(const std::string& path,
                                        const std::function<void(float)>& progress) {
  auto t0 = std::chrono::steady_clock::now();
  storage::LoadOptions opts;
  opts.timelineOnly = true;
  // The reader's own progress takes 90 %, indexing the rest.
  model::LiveState live;  // whether the run is being written (storage/RunLiveness.h)
  model::RunModel model = storage::loadObserved(
      path, opts,
      [&progress](float f) {
        if (progress) progress(0.9f * f);
      },
      &live);
  double loadSeconds = since(t0);
  auto run = indexTimeline(std::move(model));
  run->loadSeconds = loadSeconds;
  run->live = live.line();  // the whole line, as the CLI says it
  if (progress) progress(1.0f);
  return run;
}

model::RunModel readDetails(const std::string& path, const std::function<void(float)>& progress) {
  storage::LoadOptions opts;
  opts.detailsOnly = true;
  return storage::loadRun(path, opts, progress);
}

void checkSameRun(const LoadedRun& run, const model::RunModel& details) {
  const auto& a = run.model.info;
  const auto& b = details.info;
  if (!storage::sameRunRow(run.model, details))
    throw storage::RunFileError(storage::RunFileError::Kind::Corrupt,
                                run.model.path + ": the file changed while it loaded (run " +
                                    a.runId + ", status " + events::toString(a.status) +
                                    " when the timeline was read; run " + b.runId + ", status " +
                                    events::toString(b.status) + " now): open it again");
}

model::RunModel loadDetails(const LoadedRun& run, const std::function<void(float)>& progress) {
  model::RunModel d = readDetails(run.model.path, progress);
  checkSameRun(run, d);
  return d;
}

void mergeDetails(LoadedRun& run, model::RunModel&& details) {
  storage::mergeDetails(run.model, std::move(details));
}

RunProblems judgeRun(const LoadedRun& run) {
  return findProblems(run.model, run.replay);
}

void completeDetails(LoadedRun& run, RunProblems&& problems) {
  run.problems = std::move(problems);
  run.detailsLoaded = true;
}

std::vector<uint8_t> transferPayload(const LoadedRun& run, int64_t transferIndex) {
  const auto& m = run.model;
  if (transferIndex < 0 || transferIndex >= static_cast<int64_t>(m.transfers.size())) return {};
  if (!m.transfers[transferIndex].payload.empty()) return m.transfers[transferIndex].payload;
  if (!m.path.empty() && transferIndex < static_cast<int64_t>(m.transferIds.size())) {
    try {
      return storage::loadTransferPayload(m.path, m.transferIds[transferIndex]);
    } catch (const std::exception&) {
      return {};
    }
  }
  return {};
}

}  // namespace stagescope::ui
