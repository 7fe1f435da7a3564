#include "app/CommandLine.h"

#include <sqlite3.h>

#include <cctype>
#include <cmath>
#include <cstdio>

#include "core/analysis/Check.h"
#include "core/engine/RunIdentity.h"  // kStagescopeVersion (a constant; nothing is linked)
#include "core/events/Printable.h"
#include "core/events/Suggest.h"
#include "storage/Schema.h"

namespace stagescope::app {

std::unique_ptr<CLI::App> newCommandLine(const std::string& version) {
  auto cli = std::make_unique<CLI::App>(
      "stagescope: run, record, check, compare and replay multimodule 1F1B pipelines");
  cli->require_subcommand(1);
  cli->set_version_flag("--version", version,
                        "print the versions of stagescope, LibTorch, "
                        "SQLite and the run-file format");
  return cli;
}

CLI::App* addRunCommand(CLI::App& cli, RunOptions& run) {
  auto* runCmd = cli.add_subcommand("run", "launch the ranks of CONFIG locally and record the run");
  runCmd->add_option("config", run.config, "run configuration (TOML)")->required();
  runCmd->add_option("--set", run.overrides, "override a config value: key=value (repeatable)");
  runCmd->add_option("--fault", run.faults,
                     "inject a fault: KIND:iteration=I,microbatch=M,module=NAME,stage=S,"
                     "direction=activation|gradient[,delay=SECONDS][,rank=R] (repeatable; KIND "
                     "is delay, drop, corrupt, shape, nan, inf or kill)");
  runCmd->add_option("-o,--out", run.out, "run file (default runs/<config>-<time>.db)")
      ->check(pathValidator());
  runCmd->add_option("--record", run.record, "recording level: off, meta, stats, full")
      ->check(nonEmptyValidator());
  runCmd->add_flag("--reference", run.reference, "also record the single-process reference");
  runCmd->add_flag("--check", run.check, "check the run file afterwards; exit with its code");
  runCmd->add_option("--repeat", run.repeat, "run N times and require bitwise-identical runs")
      ->check(CLI::Range(1, 1000));
  runCmd->add_flag(
      "--force", run.force,
      "replace an existing run file at -o (with its shards; never any other file), and "
      "run even when the memory estimate exceeds MemAvailable");
  runCmd->add_flag("-q,--quiet", run.quiet, "do not forward rank output");
  runCmd->add_flag("--keep-shards", run.keepShards,
                   "keep the rank shards of a completed run (by default a completed, merged run "
                   "is one file; an unfinished run always keeps them for `merge`)");
  return runCmd;
}

CLI::App* addWorkerCommand(CLI::App& cli, WorkerOptions& worker) {
  auto* workerCmd =
      cli.add_subcommand("worker", "run one rank (RANK/WORLD_SIZE/MASTER_* from env)");
  workerCmd->add_option("config", worker.config)->required();
  workerCmd->add_option("-o,--out", worker.out, "run file next to which the shard is written")
      ->required();
  return workerCmd;
}

const CLI::Validator& toleranceValidator() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        double x = 0;
        // Decimal only: lexical_cast also reads hexadecimal ("0x10" as 16).
        const bool hex = text.find_first_of("xX") != std::string::npos;
        if (hex || !CLI::detail::lexical_cast(text, x) || !std::isfinite(x) || x < 0) {
          return "expected a finite number >= 0, got '" + events::shownValue(text) + "'";
        }
        return "";
      },
      "TOL>=0");
  return v;
}

const CLI::Validator& nonEmptyValidator() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        return text.empty() ? std::string("expected a value, got an empty string") : std::string();
      },
      "");
  return v;
}

const CLI::Validator& pathValidator() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        return text.empty() ? std::string("expected a path, got an empty string") : std::string();
      },
      "PATH");
  return v;
}

namespace {

// The positional argument a RequiredError is about, in words: "missing B (the second run
// file); usage: stagescope compare A B [OPTIONS]" instead of CLI11's "b is required".
std::string missingPositional(const CLI::App& sub) {
  std::string usage, missing;
  for (const CLI::Option* o : sub.get_options()) {
    if (!o->get_positional()) continue;
    usage += " " + o->get_name();
    if (o->get_required() && o->count() == 0 && missing.empty()) {
      missing = o->get_name();
      if (!o->get_description().empty()) missing += " (" + o->get_description() + ")";
    }
  }
  if (missing.empty()) return "";
  return "missing " + missing + "; usage: stagescope " + sub.get_name() + usage + " [OPTIONS]";
}

// Config values are not options: `run CONFIG --iterations 5` is told to use --set.
std::string configValueHint(const CLI::App& sub, const std::string& error) {
  const std::string name = sub.get_name();
  // `worker` reads its config as given (the launcher's ranks must agree on it): no --set.
  if (name == "worker" && error.find("--set") != std::string::npos)
    return "; a worker takes no --set: every rank reads the config file as given (write the value "
           "there)";
  if (name != "run" && name != "plan") return "";
  const size_t at = error.find("--");
  if (at == std::string::npos) return "";
  size_t end = at + 2;
  while (end < error.size() && (std::isalnum(static_cast<unsigned char>(error[end])) ||
                                error[end] == '_' || error[end] == '-' || error[end] == '.'))
    ++end;
  std::string key = error.substr(at + 2, end - at - 2);
  for (char& c : key)
    if (c == '-') c = '_';
  if (key.empty() || key == "set") return "";
  return "; config values are set with --set " + key + "=VALUE (every key: docs/config.md)";
}

}  // namespace

bool parseWindowSize(const std::string& text, int* width, int* height) {
  int w = 0, h = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%dx%d%c", &w, &h, &tail) != 2 || w < 200 || h < 150 || w > 16384 ||
      h > 16384)
    return false;
  *width = w;
  *height = h;
  return true;
}

const CLI::Validator& windowSizeValidator() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        int w = 0, h = 0;
        return parseWindowSize(text, &w, &h)
                   ? std::string()
                   : "expected WIDTHxHEIGHT between 200x150 and 16384x16384, got '" +
                         events::shownValue(text) + "'";
      },
      "WxH");
  return v;
}

std::optional<int> parseCommandLine(CLI::App& cli, int argc, char** argv) {
  if (argc == 1) {  // no command: what there is to do, not an error
    std::printf("%s", cli.help().c_str());
    return 0;
  }
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const auto* sub : cli.get_subcommands({})) known = known || sub->get_name() == argv[1];
    if (!known) {
      // A near miss is named ("did you mean 'check'?"), else every command is listed.
      std::vector<std::string> names;
      for (const auto* sub : cli.get_subcommands({})) names.push_back(sub->get_name());
      std::string hint = events::didYouMean(argv[1], names);
      if (hint.empty()) {
        hint = "; expected one of:";
        for (const auto& n : names) hint += " " + n;
      }
      std::fprintf(stderr, "error: unknown command '%s'%s\n", events::shownValue(argv[1]).c_str(),
                   hint.c_str());
      std::fprintf(stderr, "usage: stagescope --help\n");
      return analysis::exit_code::kUsage;
    }
  }
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return cli.exit(e);
    // Usage errors: one line naming what was wrong, one line saying where help is; exit 2.
    std::string where = "stagescope";
    const CLI::App* used = nullptr;
    for (const auto* sub : cli.get_subcommands()) {
      where += " " + sub->get_name();
      used = sub;
    }
    std::string message = e.what();
    if (used && e.get_exit_code() == static_cast<int>(CLI::ExitCodes::RequiredError)) {
      if (std::string missing = missingPositional(*used); !missing.empty()) message = missing;
    }
    if (used && e.get_exit_code() == static_cast<int>(CLI::ExitCodes::ExtrasError))
      message += configValueHint(*used, message);
    // CLI11's message quotes the value it refused: the whole message is capped (4x a value's cap).
    std::fprintf(stderr, "error: %s\n",
                 events::shownValue(message, 4 * events::kMaxShownBytes).c_str());
    std::fprintf(stderr, "usage: %s --help\n", where.c_str());
    return analysis::exit_code::kUsage;
  }
  return std::nullopt;
}

std::string versionText(const std::string& torchLine) {
  return std::string("stagescope ") + engine::kStagescopeVersion + "\n" + torchLine + "\nSQLite " +
         sqlite3_libversion() + "\nrun file format " + std::to_string(storage::kSchemaVersion) +
         " (application_id 0x53544753)";
}

}  // namespace stagescope::app
