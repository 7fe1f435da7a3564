// Where a command may write: the output policy (docs/commands.md "Output files: what a command
// may write").
//
// A command writes a file only where nothing of value can be lost:
//   * a run file (`run -o`, `merge --config`): a path where nothing exists, an empty regular
//     file, or - only with `run --force` - an existing stagescope run file, which is replaced
//     together with its companions (its rank shards "<run>.rank<N>.shard", the launcher's
//     "<run>.launcher.shard" and "<run>.exits.shard", SQLite's "<run>-journal"/"-wal"/"-shm").
//     Never an input of the command (the config), a directory (or any path ending in '/'), a
//     symbolic link, a special file (/dev/null, a FIFO, a socket), or a file of any other kind -
//     not even with --force.
//   * a report (`compare --html/--md/--json`, `check --junit/--json`, `export --chrome-trace`,
//     the viewer's `--screenshot PNG` and `--script 'screenshot PNG'` with their PNG.probes):
//     a path where nothing exists, an empty regular file, or an earlier report of the same kind
//     (recognised by its content, not its name).  Never an input of the command, another
//     output of the same command, a directory, a symbolic link or a special file.
//   * standard output: `-` given to a report option whose report is text (`compare
//     --html/--md/--json`, `check --junit/--json`) writes that report to standard output, and
//     the command's human text (check's findings, compare's summary) goes to standard error,
//     so that standard output holds the report alone.  One report at most: two options given
//     `-` are refused.  Elsewhere (`export --chrome-trace`, screenshots) `-` is a file name.
// Missing parent directories of an output are created (like `mkdir -p`); when that fails the
// command stops with one line naming the directory and the system's reason.
// Every check runs before the command does any work, so a refused command changes nothing.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace stagescope::storage {

// The output path is refused by the policy (exit 2, like any other bad command line).
class OutputRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ReportKind {
  CompareHtml,
  CompareMarkdown,
  CompareJson,
  CheckJUnit,
  CheckJson,
  ChromeTrace,
  Screenshot,       // the viewer's PNG
  ScreenshotProbes  // where the viewer drew things, next to its PNG (PNG.probes)
};
const char* describe(ReportKind kind);  // "a compare HTML report", ...

struct ReportOutput {
  std::string flag;  // "--html", for the message
  std::string path;  // empty: not requested
  ReportKind kind;
};

// A report that may go to standard output (`-`): the ones written as text (report::writeTextFile).
bool acceptsStandardOutput(ReportKind kind);

// What the claim found.
struct ClaimedReports {
  bool reportOnStandardOutput = false;  // one output is `-`
  // Where the command's human text goes: stdout, or stderr when a report has stdout.
  std::FILE* humanText() const { return reportOnStandardOutput ? stderr : stdout; }
};

// Checks every requested report output against the policy and the command's input files,
// then creates missing parent directories.  Throws OutputRefused (or std::runtime_error when a
// directory cannot be created).
ClaimedReports claimReportOutputs(const std::vector<ReportOutput>& outputs,
                                  const std::vector<std::string>& inputs);

// The viewer's screenshots: each PNG path and its PNG.probes companion, claimed like reports
// (`flag` names the option in messages); `inputs` are the run files the viewer opens.
void claimScreenshotOutputs(const std::string& flag, const std::vector<std::string>& pngs,
                            const std::vector<std::string>& inputs);

// What `run` may do at a run-file path.
struct RunOutputPlan {
  std::vector<std::string> replace;  // files removed before the new run file is created
};
// Checks `out` against the policy: refuses `inputs` (the config), directories, links, special
// files, non-run files; an existing run file or leftover companions only with `force`.
// `flag` names the option in messages ("-o").  `ownShards`: the shards next to `out` are the
// ones to merge into it (`merge --config`), not leftovers.  Throws OutputRefused; no side
// effects.
RunOutputPlan checkRunOutput(const std::string& out, const std::vector<std::string>& inputs,
                             bool force, const std::string& flag = "-o", bool ownShards = false);

// Creates the missing parent directories of `path` and makes sure we may write in the last one
// (throws std::runtime_error naming the directory and the system's reason).
void createParentDirectories(const std::string& path);

// The first bytes of a SQLite database with PRAGMA application_id 'STGS' (run file or shard).
bool isStagescopeFile(const std::string& path);
// A stagescope run file (not a shard): the header above and a `shards` table.
bool isRunFile(const std::string& path);

}  // namespace stagescope::storage
