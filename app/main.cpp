// stagescope: the command-line entry.  Thin: parse arguments, call the part, print, exit.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "app/Commands.h"
#include "app/RunChecks.h"
#include "app/report/CheckReport.h"
#include "app/report/ChromeTrace.h"
#include "app/report/CompareReport.h"
#include "app/report/Progress.h"
#include "core/plan/Config.h"
#include "storage/Merge.h"
#include "storage/RunReader.h"
#ifdef STAGESCOPE_HAVE_UI
#include "ui/Viewer.h"
#endif

namespace stagescope::app {

// Loads a run file with a progress bar on a terminal (plain lines in CI logs), shown only
// when loading takes longer than half a second: small files and errors stay one line.
storage::RunModel loadWithProgress(const std::string& path, storage::LoadOptions opts) {
  const auto start = std::chrono::steady_clock::now();
  std::optional<report::Progress> progress;
  auto model = storage::loadRun(path, opts, [&](float f) {
    if (!progress && std::chrono::steady_clock::now() - start > std::chrono::milliseconds(500)) {
      progress.emplace("loading " + path, 1000);
    }
    if (progress) progress->update(static_cast<uint64_t>(f * 1000));
  });
  if (progress) progress->finish();
  return model;
}

namespace {

int compareCommand(const std::string& a, const std::string& b, const std::string& html,
                   const std::string& md, const std::string& json, double tol) {
  try {
    // Payloads (level full) let the comparison judge values, not checksums or norms.
    storage::LoadOptions load;
    load.payloads = true;
    storage::RunModel ra = loadWithProgress(a, load), rb = loadWithProgress(b, load);
    analysis::CompareOptions opts;
    opts.labelA = a;
    opts.labelB = b;
    opts.tolerance = tol;
    opts.filterA = recordFilterOf(ra);
    opts.filterB = recordFilterOf(rb);
    analysis::Comparison c = analysis::compareRuns(ra, rb, opts);
    std::fputs(report::renderMarkdown(c).c_str(), stdout);
    if (!html.empty()) report::writeHtml(c, html);
    if (!md.empty()) report::writeMarkdown(c, md);
    if (!json.empty()) report::writeJson(c, json);
    return analysis::exitCodeOf(c.verdict);
  } catch (const storage::RunFileError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return analysis::exit_code::kError;
  }
}

int exportCommand(const std::string& run, const std::string& trace) {
  try {
    auto stats = report::writeChromeTrace(loadWithProgress(run, {}), trace);
    (void)stats;
    std::printf("wrote %s\n", trace.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return analysis::exit_code::kError;
  }
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

// Why `merge RUN` without --config cannot go on, and what to add.
std::string missingRunFileHint(const std::string& run, const std::vector<std::string>& shards) {
  if (shards.empty())
    return run + ": no such run file, and no shard " + run + ".rank<N>.shard next to it";
  return run + ": no such run file; its " + std::to_string(shards.size()) +
         " shard(s) were written by `stagescope worker` (torchrun, Slurm, several hosts): add "
         "--config CONFIG, the config the ranks ran, to create the run file and merge them";
}

}  // namespace

int mergeCommand(const std::string& run, const std::vector<std::string>& shards,
                 const std::string& config) {
  try {
    const std::vector<std::string> inputs = shards.empty() ? storage::findShards(run) : shards;
    const bool create = !config.empty() && !std::filesystem::exists(run);
    if (config.empty() && !std::filesystem::exists(run)) {
      std::fprintf(stderr, "error: %s\n", missingRunFileHint(run, inputs).c_str());
      return analysis::exit_code::kUsage;
    }
    if (create) createRunFileFor(config, run, runIdOfShards(inputs));
    auto result = storage::mergeShards(run, inputs);
    std::printf("merged %d shard(s), %lld rows in %.2f s\n", result.merged,
                static_cast<long long>(result.rows), result.seconds);
    for (const auto& n : result.notes) std::printf("  %s\n", n.c_str());
    if (create) {
      // The ranks ran without our launcher: judge the run by what they recorded.
      storage::RunModel m = storage::loadRun(run);
      auto status = events::RunStatus::Completed;
      std::string reason;
      for (const auto& d : m.diagnoses) {
        if (d.kind == "timeout" || d.kind == "error" || d.kind == "peer_lost" ||
            d.kind == "config_mismatch") {
          status = d.kind == "timeout" ? events::RunStatus::Hung : events::RunStatus::Failed;
          reason = "rank " + std::to_string(d.rank) + ": " + d.message;
          break;
        }
      }
      // Ranks write an iteration's plan rows as it starts: a rank completed when it started
      // every iteration its record filter keeps and executed every planned action.
      const plan::RunConfig cfg = plan::loadConfig(config);
      for (int r = 0; status == events::RunStatus::Completed && r < m.info.worldSize; ++r) {
        const size_t planned = r < static_cast<int>(m.plan.size()) ? m.plan[r].size() : 0;
        const size_t done = r < static_cast<int>(m.actions.size()) ? m.actions[r].size() : 0;
        const auto* module = cfg.moduleOfRank(r);
        int wanted = 0, started = 0;
        for (int it = 0; module && it < cfg.iterations; ++it)
          wanted += cfg.record.wants(it, module->name, r) ? 1 : 0;
        for (size_t k = 0; k < planned; ++k)
          started += k == 0 || m.plan[r][k].iteration != m.plan[r][k - 1].iteration ? 1 : 0;
        if (planned == 0 || done < planned || started < wanted) {
          status = events::RunStatus::Failed;
          reason = "rank " + std::to_string(r) + " recorded " + std::to_string(done) + " of " +
                   std::to_string(planned) + " planned actions in " + std::to_string(started) +
                   " of " + std::to_string(wanted) + " iterations (shard missing or rank stopped)";
        }
      }
      if (!result.ok() && status == events::RunStatus::Completed) {
        status = events::RunStatus::Failed;
        reason = "some shards were not merged";
      }
      const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      storage::updateRunStatus(run, status, reason, now);
      std::printf("created %s: run %s%s%s\n", run.c_str(), events::toString(status),
                  reason.empty() ? "" : ": ", reason.c_str());
      if (status != events::RunStatus::Completed) return analysis::exit_code::kRunStatus;
    }
    return result.ok() ? 0 : analysis::exit_code::kRunStatus;
  } catch (const plan::ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return analysis::exit_code::kUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return analysis::exit_code::kError;
  }
}

}  // namespace stagescope::app

int main(int argc, char** argv) {
  using namespace stagescope::app;
  CLI::App cli{"stagescope: run, record, check, compare and replay multimodule 1F1B pipelines"};
  cli.require_subcommand(1);

  RunOptions run;
  auto* runCmd = cli.add_subcommand("run", "launch the ranks of CONFIG locally and record the run");
  runCmd->add_option("config", run.config, "run configuration (TOML)")->required();
  runCmd->add_option("--set", run.overrides, "override a config value: key=value (repeatable)");
  runCmd->add_option("--fault", run.faults,
                     "inject a fault: KIND:iteration=I,microbatch=M,module=NAME,stage=S,"
                     "direction=activation|gradient[,delay=SECONDS][,rank=R] (repeatable; KIND "
                     "is delay, drop, corrupt, shape, nan, inf or kill)");
  runCmd->add_option("-o,--out", run.out, "run file (default runs/<config>-<time>.db)");
  runCmd->add_option("--record", run.record, "recording level: off, meta, stats, full");
  runCmd->add_flag("--reference", run.reference, "also record the single-process reference");
  runCmd->add_flag("--check", run.check, "check the run file afterwards; exit with its code");
  runCmd->add_option("--repeat", run.repeat, "run N times and require bitwise-identical runs");
  runCmd->add_flag("-q,--quiet", run.quiet, "do not forward rank output");

  WorkerOptions worker;
  auto* workerCmd =
      cli.add_subcommand("worker", "run one rank (RANK/WORLD_SIZE/MASTER_* from env)");
  workerCmd->add_option("config", worker.config)->required();
  workerCmd->add_option("-o,--out", worker.out, "run file next to which the shard is written")
      ->required();

  std::string planConfig;
  std::vector<std::string> planSet;
  auto* planCmd = cli.add_subcommand("plan", "validate CONFIG and print the per-rank 1F1B plan");
  planCmd->add_option("config", planConfig)->required();
  planCmd->add_option("--set", planSet, "override a config value: key=value");

  std::string checkRun, against;
  CheckFiles files;
  bool tolerant = false;
  auto* checkCmd = cli.add_subcommand("check", "check a run file; exit code per failure class");
  checkCmd->add_option("run", checkRun)->required();
  checkCmd->add_option("--against", against, "another run that must be equal");
  checkCmd->add_flag("--tolerant", tolerant, "with --against: equal within --tol, not bitwise");
  checkCmd->add_option("--tol", files.tolerance,
                       "relative L2 tolerance for the reference gradients and --tolerant "
                       "(default: the per-iteration, dtype-aware rule, docs/analysis.md)");
  checkCmd->add_option("--junit", files.junit, "write a JUnit XML report");
  checkCmd->add_option("--json", files.json, "write the findings as JSON");

  std::string cmpA, cmpB, html, md, json;
  double cmpTol = -1;
  auto* cmpCmd = cli.add_subcommand("compare", "compare two runs (aligned by logical identity)");
  cmpCmd->add_option("a", cmpA)->required();
  cmpCmd->add_option("b", cmpB)->required();
  cmpCmd->add_option("--html", html, "write a self-contained HTML report");
  cmpCmd->add_option("--md", md, "write a Markdown report");
  cmpCmd->add_option("--json", json, "write a JSON report");
  cmpCmd->add_option("--tol", cmpTol,
                     "one relative L2 tolerance for every value (default: the per-iteration rule, "
                     "docs/analysis.md)");

  std::string exportRun, trace;
  auto* exportCmd = cli.add_subcommand("export", "export a run as a Chrome/Perfetto trace");
  exportCmd->add_option("run", exportRun)->required();
  exportCmd->add_option("--chrome-trace", trace, "trace JSON file")->required();

  std::string mergeRun;
  std::vector<std::string> mergeShards;
  auto* mergeCmd = cli.add_subcommand("merge", "merge rank shards into a run file");
  mergeCmd->add_option("run", mergeRun)->required();
  mergeCmd->add_option("shards", mergeShards, "shard files (default: <run>.rank<N>.shard)");
  std::string mergeConfig;
  mergeCmd->add_option("--config", mergeConfig,
                       "create RUN from this config first if it does not exist (ranks started "
                       "with `stagescope worker`, e.g. on several hosts)");

#ifdef STAGESCOPE_HAVE_UI
  stagescope::ui::ViewerOptions viewer;
  auto* guiCmd = cli.add_subcommand("gui", "open the replay viewer on RUN [OTHER]");
  guiCmd->add_option("run", viewer.run);
  guiCmd->add_option("other", viewer.other);
  guiCmd->add_option("--screenshot", viewer.screenshot, "write a PNG after the script");
  guiCmd->add_option("--script", viewer.script, "a scripted command (repeatable; see below)");
  guiCmd->footer(stagescope::ui::scriptCommandHelp());
#endif

  CLI11_PARSE(cli, argc, argv);
  if (*runCmd) return runCommand(run);
  if (*workerCmd) return workerCommand(worker);
  if (*planCmd) return planCommand(planConfig, planSet);
  if (*checkCmd) {
    files.bitwise = !tolerant;
    return checkRunFile(checkRun, against, files);
  }
  if (*cmpCmd) return stagescope::app::compareCommand(cmpA, cmpB, html, md, json, cmpTol);
  if (*exportCmd) return stagescope::app::exportCommand(exportRun, trace);
  if (*mergeCmd) return mergeCommand(mergeRun, mergeShards, mergeConfig);
#ifdef STAGESCOPE_HAVE_UI
  if (*guiCmd) return stagescope::ui::runViewer(viewer);
#endif
  return 2;
}
