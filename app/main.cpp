// stagescope: the command-line entry.  Thin: parse arguments, call the part, print, exit.
// Links no LibTorch: `run` and `worker` are parsed here and then executed by the engine
// executable next to this one (app/EngineExec.h).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>

#include "app/CommandLine.h"
#include "app/Commands.h"
#include "app/Completion.h"
#include "app/EngineExec.h"
#include "app/ErrorBoundary.h"
#include "app/MergeWithProgress.h"
#include "app/RunChecks.h"
#include "app/RunLoading.h"
#include "app/report/CheckReport.h"
#include "app/report/ChromeTrace.h"
#include "app/report/CompareReport.h"
#include "app/report/Progress.h"
#include "core/analysis/CaptureEnd.h"
#include "core/analysis/HangGraph.h"
#include "core/analysis/PlanConformance.h"
#include "core/analysis/RunVerdict.h"
#include "core/events/CapturedLayout.h"
#include "core/events/Printable.h"
#include "core/plan/Config.h"
#include "storage/LiveShards.h"
#include "storage/Merge.h"
#include "storage/OutputPolicy.h"
#include "storage/RunFileLock.h"
#include "storage/RunLiveness.h"
#include "storage/RunReader.h"
#include "storage/Schema.h"
#include "storage/ShardWriter.h"
#include "storage/Sqlite.h"
#ifdef STAGESCOPE_HAVE_UI
#include "ui/Viewer.h"
#endif

namespace stagescope::app {

namespace {

int compareCommand(const std::string& a, const std::string& b, const std::string& html,
                   const std::string& md, const std::string& json, double tol) {
  // Refuse a bad output before the (possibly long) load: nothing is printed, nothing lost.
  const storage::ClaimedReports claimed =
      storage::claimReportOutputs({{"--html", html, storage::ReportKind::CompareHtml},
                                   {"--md", md, storage::ReportKind::CompareMarkdown},
                                   {"--json", json, storage::ReportKind::CompareJson}},
                                  {a, b});
  // Payloads (level full) let the comparison judge values, not checksums or norms.  Only the
  // gradients the comparison judges are kept (core/analysis/Align.h): reduced and initial ones
  // with payloads, the per-microbatch ones (most of a run's rows, 1.4 GB of a 10^7-event run's
  // payloads) without, and no parameters after the step.
  storage::LoadOptions load;
  load.payloads = true;
  load.comparedGradients = true;
  model::LiveState liveA, liveB;  // storage/RunLiveness.h
  auto [ra, rb] = loadTwoWithProgress(a, b, load, load, &liveA, &liveB);
  analysis::CompareOptions opts;
  opts.labelA = a;
  opts.labelB = b;
  opts.tolerance = tol;
  opts.filterA = analysis::recordFilterOf(ra);
  opts.filterB = analysis::recordFilterOf(rb);
  // The plans serve only the coverage: taken now, they go before the alignment's own memory
  // is allocated (two message-heavy 10^7-event runs: peak 3.07 -> 2.5 GB).
  opts.coverageA = analysis::coverageOf(ra, opts.filterA);
  opts.coverageB = analysis::coverageOf(rb, opts.filterB);
  // A run being written is a snapshot: said in one line, and never complete (INCOMPLETE).
  for (auto [label, live, cov] :
       {std::tuple{&a, &liveA, &*opts.coverageA}, std::tuple{&b, &liveB, &*opts.coverageB}}) {
    if (!live->live()) continue;
    std::fprintf(stderr, "%s\n", events::printableLine(*label + ": " + live->line()).c_str());
    cov->completed = false;
    cov->status += ", " + live->summary;
    cov->missing.insert(cov->missing.begin(),
                        "the run has not ended: " + live->line() + "; compare again once it has");
  }
  std::vector<std::vector<events::ActionRecord>>().swap(ra.plan);
  std::vector<std::vector<events::ActionRecord>>().swap(rb.plan);
  analysis::Comparison c = analysis::compareRuns(ra, rb, opts);
  // The report files first: one that cannot be written (a read-only folder, a full disk) fails
  // the command before anything is printed, not after the whole report scrolled by.
  if (!html.empty()) report::writeHtml(c, html);
  if (!md.empty()) report::writeMarkdown(c, md);
  if (!json.empty()) report::writeJson(c, json);
  if (!c.refused.empty()) {
    // Refused in one line: a report of two unrelated runs would only list their differences.
    std::fprintf(stderr, "compare: %s\n",
                 events::printableLine("cannot compare " + a + " with " + b + ": " + c.refused +
                                       "; nothing was compared (exit 19)")
                     .c_str());
  } else {
    std::fputs(report::renderMarkdown(c).c_str(), claimed.humanText());
  }
  std::fflush(claimed.humanText());
  keepUntilExit(std::move(ra));
  keepUntilExit(std::move(rb));
  return analysis::exitCodeOf(c.verdict);
}

int exportCommand(const std::string& run, const std::string& trace) {
  storage::claimReportOutputs({{"--chrome-trace", trace, storage::ReportKind::ChromeTrace}}, {run});
  storage::LoadOptions load;
  load.timelineOnly = true;  // the trace shows actions, messages and diagnoses only
  model::LiveState live;     // storage/RunLiveness.h
  model::RunModel model = loadWithProgress(run, load, &live);
  (void)report::writeChromeTrace(model, trace);
  keepUntilExit(std::move(model));
  // A run being written: the trace holds what its ranks had committed (a snapshot).
  if (live.live())
    std::fprintf(
        stderr, "%s\n",
        events::printableLine(run + ": " + live.line() + "; the trace is a snapshot").c_str());
  std::printf("wrote %s\n", trace.c_str());
  return 0;
}

// A captured PyTorch job (app/capture) has no stagescope config or plan to judge it by.
bool isCapturedRun(const model::RunModel& m) {
  return m.info.captured();
}

}  // namespace

namespace {

// The run id the ranks recorded (the first shard that names one), or "" for the default.
std::string runIdOfShards(const std::vector<std::string>& shards) {
  for (const auto& shard : shards) {
    try {
      if (auto info = storage::readShardRunInfo(shard)) return info->runId;
    } catch (const std::exception&) {
      // unreadable: the merge records it as failed
    }
  }
  return "";
}

// A rank that stopped without a record, named by the verdict as the root cause, gets the
// `rank_killed` row `stagescope run` writes from waitpid (the viewer's "killed" fate), with the
// verdict's sentence.  Written through a shard of its own next to the run file, as the launcher
// does; a failure to write it is reported and leaves the run file as judged.
void recordSilentRank(const std::string& run, int rank, int signal, const std::string& reason) {
  try {
    const std::string shard = run + ".verdict.shard";
    auto writer = storage::ShardWriter::open(shard, events::RecordLevel::Meta, -1);
    events::DiagnosisRecord d;
    d.rank = rank;
    d.kind = events::DiagnosisKind::RankKilled;
    d.message = "killed or crashed (no record of its own): " + reason;
    d.signal = signal;  // as its peers saw it (RunVerdict::silentSignal); 0 when none did
    writer->diagnosis(std::move(d));
    writer->close();
    storage::MergeResult m = storage::mergeShards(run, {shard});
    for (const auto& note : m.notes) std::fprintf(stderr, "merge: %s\n", note.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "merge: rank %d's fate was not recorded: %s\n", rank, oneLine(e).c_str());
  }
}

// Why `merge RUN` without --config cannot go on, and what to add.
std::string missingRunFileHint(const std::string& run, const std::vector<std::string>& shards) {
  if (shards.empty())
    return run + ": no such run file, and no shard " + run + ".rank<N>.shard next to it";
  return run + ": no such run file; its " + std::to_string(shards.size()) +
         " shard(s) were written by `stagescope worker` (torchrun, Slurm, several hosts): add "
         "--config CONFIG, the config the ranks ran, to create the run file and merge them";
}

// A shard named on the command line: a regular file (links followed) holding a stagescope
// shard, and not the run file itself; anything else is refused before the merge writes.
void checkShardArgument(const std::string& shard, const std::string& run) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(shard, ec);
  const std::string what = "merge: shard " + shard;
  if (ec == std::errc::too_many_symbolic_link_levels)
    throw UsageError(what + ": a loop of symbolic links; expected a shard file");
  if (st.type() == fs::file_type::not_found)
    throw UsageError(what + ": no such file; expected a shard file (" + run + ".rank<N>.shard)");
  if (st.type() != fs::file_type::regular)
    throw UsageError(what +
                     ": not a regular file (a directory, FIFO or device); expected a shard file");
  if (fs::equivalent(shard, run, ec))
    throw UsageError(what + ": is the run file itself; expected one of its shards");
  // A rank that was killed leaves its shard's header unwritten (an empty file, or one whose
  // header still lacks the application id) and what it committed in the -wal beside it: the
  // merge recovers and judges such a shard, as it does one it finds by name.
  const bool killedWriter = (std::filesystem::file_size(shard, ec) == 0 && !ec) ||
                            std::filesystem::is_regular_file(shard + "-wal", ec);
  if (!killedWriter && (!storage::isStagescopeFile(shard) || storage::isRunFile(shard)))
    throw UsageError(what +
                     ": not a stagescope shard; expected a file written by `stagescope worker`");
}

// Into an existing run file, a shard whose `run` row names another run id or config hash is
// refused before anything is written: it would merge nothing, and the run, found with a shard
// "not merged", was re-judged from `completed` to `failed` (storage::mergeShards records such
// a shard 'refused' when it merges into a run file it creates).  A shard that cannot be read
// here, or names no run, is left to the merge to judge.
void refuseShardsOfAnotherRun(const std::string& run, const events::RunInfo& info,
                              const std::vector<std::string>& shards) {
  if (info.runId.empty() || info.configHash.empty()) return;
  for (const auto& shard : shards) {
    std::optional<events::RunInfo> of;
    try {
      of = storage::readShardRunInfo(shard);
    } catch (const std::exception&) {
      continue;
    }
    if (!of || of->runId.empty() || of->configHash.empty()) continue;
    std::string why;
    if (of->runId != info.runId)
      why = "run id '" + of->runId + "' differs from the run file's '" + info.runId +
            "' (a shard of another run)";
    else if (of->configHash != info.configHash)
      why = "config hash " + of->configHash + " differs from the run file's " + info.configHash +
            " (the rank ran another config)";
    if (!why.empty())
      throw UsageError("merge: shard " + shard + ": " + why + "; " + run +
                       " is left as it was (move the shard away, or merge it into its own run)");
  }
}

}  // namespace

namespace {

// Everything merge checks before it writes: the shard arguments, that `run` is a run file (or
// may be created: `config` given), not locked by another writer, and, when it exists, one this
// build reads whole (a tampered schema, a view or trigger, a config it cannot parse is refused
// unchanged) of the shards' run.  Returns whether merge creates the run file.
bool checkMergeTarget(const std::string& run, const std::vector<std::string>& shards,
                      const std::vector<std::string>& inputs, const std::string& config) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(std::filesystem::symlink_status(run, ec));
  if (!exists && config.empty()) throw UsageError(missingRunFileHint(run, inputs));
  for (const auto& shard : shards) checkShardArgument(shard, run);
  // The run file must be one (merge writes into it; it never replaces anything): `force`
  // here only means "an existing run file is what we want".
  storage::RunFileLock::throwIfHeld(run);
  storage::checkRunOutput(run, {config}, /*force=*/true, "RUN", /*ownShards=*/true);
  if (!exists) storage::createParentDirectories(run);
  return !exists;
}

// An existing run file read whole before anything is written into it (see checkMergeTarget).
void checkExistingRunFile(const std::string& run, const std::vector<std::string>& inputs) {
  // A writer's open rolls back the hot journal of a writer that died (merge's job).
  { const storage::Db recovered = storage::openStagescopeFile(run, /*writable=*/true); }
  const model::RunModel existing = storage::loadRun(run);
  if (!isCapturedRun(existing)) (void)plan::parseConfig(existing.info.configText, run);
  refuseShardsOfAnotherRun(run, existing.info, inputs);
}

// Merges `inputs` into `run`, printing what was merged.  A merge that fails marks a run file it
// created failed (when it can still be written: the records wait in the shards) and rethrows.
storage::MergeResult mergeInto(const std::string& run, const std::vector<std::string>& inputs,
                               bool create) {
  storage::MergeResult result;
  try {
    result = mergeWithProgress(run, inputs);
  } catch (const std::exception& e) {
    if (create) {
      try {
        storage::updateRunStatus(run, events::RunStatus::Failed,
                                 "merge failed: " + oneLine(e) + "; run `stagescope merge " + run +
                                     "` again once the cause is fixed",
                                 0);
      } catch (const std::exception&) {
      }
    }
    throw;
  }
  std::printf("merged %d shard(s), %lld rows in %.2f s\n", result.merged,
              static_cast<long long>(result.rows), result.seconds);
  for (const auto& n : result.notes) std::printf("  %s\n", n.c_str());
  return result;
}

// The run's status after the merge, judged again by what is now recorded.  A run file just
// created (ranks started without our launcher) gets the judged status.  An existing run keeps
// its status unless every shard merged and the records now show a completed run (e.g. a merge
// that failed for lack of disk space, re-run after freeing some), or it was left `running`.
// The judgement reads the plan, actions and diagnoses only (analysis::judgeWorkerRun,
// analysis::judgeCapturedRun): not the run's transfers and gradients, which are ~90 % of a big
// run's rows.
analysis::RunVerdict judgeMergedRun(const model::RunModel& m, const std::string& run,
                                    const std::string& config, bool create, bool allMerged) {
  // The config the run file recorded (the one given to --config when it was just created).
  analysis::RunVerdict judged{m.info.status, m.info.statusReason};
  if (isCapturedRun(m) && !create) {
    judged = analysis::judgeCapturedRun(m, judged);
  } else {
    const plan::RunConfig cfg =
        create ? plan::loadConfig(config) : plan::parseConfig(m.info.configText, run);
    judged = analysis::judgeWorkerRun(m, cfg);
  }
  const auto stored = m.info.status;
  analysis::RunVerdict next{stored, m.info.statusReason};
  if (create || stored == events::RunStatus::Running || (isCapturedRun(m) && !create)) {
    next = judged;
  } else if (stored != events::RunStatus::Completed && allMerged &&
             judged.status == events::RunStatus::Completed) {
    next = {events::RunStatus::Completed, ""};
  }
  if (!allMerged && next.status == events::RunStatus::Completed) {
    next = {events::RunStatus::Failed, "some shards were not merged"};
  }
  return next;
}

// A captured job that hung, as `stagescope run` does for its own runs: the wait-for graph to
// the terminal and, once, as "hang" diagnoses into the run file (check and the viewer read
// them); the verdict's first line in `next`, what to change printed after it.
void explainCapturedHang(const model::RunModel& m, const std::string& run,
                         analysis::RunVerdict& next) {
  HangAnalysis hang = analyzeHang(run);
  std::printf("%s\n", hang.text.c_str());
  bool recorded = false;
  for (const auto& d : m.diagnoses) recorded = recorded || d.kind == events::DiagnosisKind::Hang;
  if (!recorded) recordHangDiagnoses(run, hang);
  // One first line: the root cause leads; every timeout and verdict is in the diagnoses.
  if (!hang.headline.empty()) next.reason = hang.headline;
  // Where the job declared its layout, its own schedule against the plan names why.
  const auto causes = analysis::declaredScheduleCauses(m.info);
  // The first line is the cause up to the section it cites (ScheduleCause::brief): the section's
  // explanation is printed in full on its own line, and in check's plan_order.
  if (!causes.empty()) {
    std::printf("cause: %s\n", causes.front().line().c_str());
    std::printf(
        "to change: the job's schedule where it parts from the plan (above; `stagescope "
        "check %s` lists each rank's difference)\n",
        events::printableLine(run).c_str());
    next.reason = "cause: " + causes.front().brief() + "; " + std::to_string(hang.verdictCount) +
                  " verdicts in the wait-for graph";
  } else if (!hang.remedy.empty()) {
    std::printf("%s\n", hang.remedy.c_str());
  }
}

// Writes `next` into the run file when it differs from what is stored, and says so.
void recordJudgement(const model::RunModel& m, const std::string& run, bool create,
                     const analysis::RunVerdict& next) {
  const auto stored = m.info.status;
  if (next.status == stored && next.reason == m.info.statusReason) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  storage::updateRunStatus(run, next.status, next.reason, now);
  if (create && next.silentRank >= 0)
    recordSilentRank(run, next.silentRank, next.silentSignal, next.reason);
  std::printf("%s %s: run %s%s%s (was %s)\n", create ? "created" : "re-judged",
              events::printableLine(run).c_str(), events::toString(next.status),
              next.reason.empty() ? "" : ": ", next.reason.c_str(),
              create ? "new" : events::toString(stored));
}

}  // namespace

int mergeCommand(const std::string& run, const std::vector<std::string>& shards,
                 const std::string& config, bool keepShards) {
  const std::vector<std::string> inputs = shards.empty() ? storage::findShards(run) : shards;
  const bool create = checkMergeTarget(run, shards, inputs, config);
  const storage::RunFileLock lock = storage::RunFileLock::acquire(run);
  if (!create) checkExistingRunFile(run, inputs);
  if (create) createRunFileFor(config, run, runIdOfShards(inputs));
  const storage::MergeResult result = mergeInto(run, inputs, create);
  // A run in progress (ranks still write their shards): what they committed so far is merged,
  // a snapshot, and its status is not judged: a peek must not brand a live run failed (it
  // was, for good: "killed by a signal (SIGKILL, the OOM killer)"). The merge after the run
  // ended judges it.
  if (const auto live = storage::liveShards(inputs); !live.empty()) {
    const storage::RunLiveness seen{static_cast<int>(inputs.size()), live, ""};
    std::printf("%s\n",
                events::printableLine(
                    run + ": " + seen.line() +
                    "; merged what they have committed so far; the run's status is left as it "
                    "is: merge again once the run has ended")
                    .c_str());
    return 0;
  }
  storage::LoadOptions statusLoad;
  statusLoad.statusOnly = true;
  const model::RunModel m = storage::loadRun(run, statusLoad);
  analysis::RunVerdict next = judgeMergedRun(m, run, config, create, result.ok());
  if (isCapturedRun(m) && next.status == events::RunStatus::Hung) explainCapturedHang(m, run, next);
  recordJudgement(m, run, create, next);
  // A completed run whose every shard merged is one file, as `run` leaves it; anything else
  // keeps its shards for the next merge.
  if (result.ok() && next.status == events::RunStatus::Completed && !keepShards) {
    if (const size_t n = removeShardsOfCompletedRun(run); n > 0)
      std::printf("removed %zu merged shard(s): the run is one file (--keep-shards keeps them)\n",
                  n);
  }
  // Exit 10 when a shard did not merge, or when the run file just created holds no complete
  // run; merging into an existing run succeeds whatever that run's status (`check` judges it).
  if (create && next.status != events::RunStatus::Completed) return analysis::exit_code::kRunStatus;
  return result.ok() ? 0 : analysis::exit_code::kRunStatus;
}

}  // namespace stagescope::app

namespace {

using namespace stagescope::app;
namespace storage = stagescope::storage;

// A command this executable runs itself: its node in the command line and, once that node was
// parsed, what runs it (returns the exit code).  Its options live in state the runner owns.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// `plan CONFIG [--set key=value]...`
Command addPlan(CLI::App& cli) {
  struct Args {
    std::string config;
    std::vector<std::string> set;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = cli.add_subcommand("plan", "validate CONFIG and print the per-rank 1F1B plan");
  cmd->add_option("config", a->config)->required();
  cmd->add_option("--set", a->set, "override a config value: key=value");
  return {cmd, [a] { return planCommand(a->config, a->set); }};
}

// `check RUN [--against OTHER [--tolerant]] [--tol T] [--plan CONFIG] [--junit F] [--json F]`
Command addCheck(CLI::App& cli) {
  struct Args {
    std::string run, against;
    CheckFiles files;
    bool tolerant = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = cli.add_subcommand("check", "check a run file; exit code per failure class");
  cmd->add_option("run", a->run)->required();
  auto* againstOpt = cmd->add_option("--against", a->against, "another run that must be equal")
                         ->check(pathValidator());
  cmd->add_flag("--tolerant", a->tolerant,
                "with --against: the runs must agree within --tol (default: bitwise)")
      ->needs(againstOpt);
  cmd->add_option("--tol", a->files.tolerance,
                  "relative L2 tolerance for the reference gradients and --tolerant "
                  "(default: the per-iteration, dtype-aware rule, docs/analysis.md)")
      ->check(toleranceValidator());
  cmd->add_option("--plan", a->files.plan,
                  "a captured job: judge its messages against the plan of this config (default: "
                  "the layout the job declared, docs/capture.md)")
      ->check(pathValidator());
  cmd->add_option("--junit", a->files.junit, "write a JUnit XML report (- : standard output)")
      ->check(pathValidator());
  cmd->add_option("--json", a->files.json, "write the findings as JSON (- : standard output)")
      ->check(pathValidator());
  return {cmd, [a] {
            a->files.bitwise = !a->tolerant;
            a->files.text = storage::claimReportOutputs(
                                {{"--junit", a->files.junit, storage::ReportKind::CheckJUnit},
                                 {"--json", a->files.json, storage::ReportKind::CheckJson}},
                                {a->run, a->against})
                                .humanText();
            return checkRunFile(a->run, a->against, a->files);
          }};
}

// `compare A B [--html F] [--md F] [--json F] [--tol T]`
Command addCompare(CLI::App& cli) {
  struct Args {
    std::string a, b, html, md, json;
    double tol = -1;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = cli.add_subcommand("compare", "compare two runs (aligned by logical identity)");
  cmd->add_option("A", a->a, "the first run file")->required();
  cmd->add_option("B", a->b, "the second run file")->required();
  cmd->add_option("--html", a->html, "write a self-contained HTML report (- : standard output)")
      ->check(pathValidator());
  cmd->add_option("--md", a->md, "write a Markdown report (- : standard output)")
      ->check(pathValidator());
  cmd->add_option("--json", a->json, "write a JSON report (- : standard output)")
      ->check(pathValidator());
  cmd->add_option("--tol", a->tol,
                  "one relative L2 tolerance for every value (default: the per-iteration rule, "
                  "docs/analysis.md)")
      ->check(toleranceValidator());
  return {cmd, [a] { return compareCommand(a->a, a->b, a->html, a->md, a->json, a->tol); }};
}

// `export RUN --chrome-trace F`
Command addExport(CLI::App& cli) {
  struct Args {
    std::string run, trace;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = cli.add_subcommand("export", "export a run as a Chrome/Perfetto trace");
  cmd->add_option("run", a->run)->required();
  cmd->add_option("--chrome-trace", a->trace, "trace JSON file")
      ->check(pathValidator())
      ->required();
  return {cmd, [a] { return exportCommand(a->run, a->trace); }};
}

// `merge RUN [SHARD...] [--keep-shards] [--config CONFIG]`
Command addMerge(CLI::App& cli) {
  struct Args {
    std::string run;
    std::vector<std::string> shards;
    std::string config;
    bool keepShards = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = cli.add_subcommand("merge", "merge rank shards into a run file");
  cmd->add_option("run", a->run)->required();
  cmd->add_option("shards", a->shards, "shard files (default: <run>.rank<N>.shard)");
  cmd->add_flag("--keep-shards", a->keepShards,
                "keep the rank shards once a completed run merged (by default the run is then "
                "one file; an unfinished run always keeps them)");
  cmd->add_option("--config", a->config,
                  "create RUN from this config first if it does not exist (ranks started "
                  "with `stagescope worker`, e.g. on several hosts)")
      ->check(pathValidator());
  return {cmd, [a] { return mergeCommand(a->run, a->shards, a->config, a->keepShards); }};
}

// `completion bash|zsh`: the script lists the commands of `cli` as they are when it runs.
Command addCompletion(CLI::App& cli) {
  auto shell = std::make_shared<std::string>();
  auto* cmd = cli.add_subcommand(
      "completion", "print a shell completion script: source <(stagescope completion bash)");
  cmd->add_option("shell", *shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  return {cmd, [shell, &cli] {
            // After every command is defined (gui included): the script lists them all.
            std::fputs(completionScript(cli, *shell).c_str(), stdout);
            return 0;
          }};
}

#ifdef STAGESCOPE_HAVE_UI
// `gui [RUN [OTHER]] [--screenshot F] [--script CMD]... [--size WxH]`
Command addGui(CLI::App& cli) {
  struct Args {
    stagescope::ui::ViewerOptions viewer;
    std::string size;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = cli.add_subcommand("gui", "open the replay viewer on RUN [OTHER]");
  cmd->add_option("run", a->viewer.run);
  cmd->add_option("other", a->viewer.other);
  cmd->add_option("--screenshot", a->viewer.screenshot, "write a PNG after the script")
      ->check(pathValidator());
  cmd->add_option("--script", a->viewer.script, "a scripted command (repeatable; see below)");
  cmd->add_option("--size", a->size, "window size WIDTHxHEIGHT (default 1600x1000)")
      ->check(windowSizeValidator());
  cmd->footer(stagescope::ui::scriptCommandHelp());
  return {cmd, [a] {
            auto& viewer = a->viewer;
            if (!a->size.empty()) parseWindowSize(a->size, &viewer.width, &viewer.height);
            // Screenshots follow the output policy like any report, checked before it opens.
            storage::claimScreenshotOutputs("--screenshot", stagescope::ui::screenshotPaths(viewer),
                                            stagescope::ui::openedPaths(viewer));
            return stagescope::ui::runViewer(viewer);
          }};
}
#endif

// The commands this executable runs itself, in the order `--help` and completion list them.
std::vector<Command> ownCommands(CLI::App& cli) {
  std::vector<Command> commands;
  commands.push_back(addPlan(cli));
  commands.push_back(addCheck(cli));
  commands.push_back(addCompare(cli));
  commands.push_back(addExport(cli));
  commands.push_back(addMerge(cli));
  commands.push_back(addCompletion(cli));
#ifdef STAGESCOPE_HAVE_UI
  commands.push_back(addGui(cli));
#endif
  return commands;
}

int cliMain(int argc, char** argv) {
  const auto cliRoot = newCommandLine(versionText(engineTorchLine()));
  CLI::App& cli = *cliRoot;
  // `run` and `worker` are defined here for help and usage errors, and run by the engine.
  RunOptions run;
  CLI::App* runCmd = addRunCommand(cli, run);
  WorkerOptions worker;
  CLI::App* workerCmd = addWorkerCommand(cli, worker);
  const std::vector<Command> commands = ownCommands(cli);

  if (const auto done = parseCommandLine(cli, argc, argv)) return *done;
  if (*runCmd) execEngine("run", argv);
  if (*workerCmd) execEngine("worker", argv);
  for (const auto& command : commands) {
    if (*command.app) return command.run();
  }
  return stagescope::analysis::exit_code::kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  installLastResorts();
  return guarded([&] { return cliMain(argc, argv); });
}
