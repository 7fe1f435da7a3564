// A data-driven harness for hostile-input cases against the real `stagescope` executable
// (issue "nothing lost, never an abort").  A case is one command run in a fresh sandbox
// directory; the harness asserts what every case must satisfy:
//   * the exit code is one of the case's codes, and one of the documented ones (docs/commands.md
//     "Exit codes (every command)") - so never 124 (timeout), 134 (abort) or 139 (segfault);
//   * stderr has at most `maxStderrLines` non-empty lines (2 unless the case says otherwise),
//     and contains the case's fragment naming what was wrong;
//   * every file that existed before the command is byte-identical afterwards (unless the case
//     names it as one the command may replace), and still there;
//   * stdout and stderr hold no raw control character (besides newline and tab): whatever a
//     hostile input quotes is printed escaped;
//   * no temporary file (a name with ".tmp-") is left behind;
//   * no process of the command is left behind (its process group is empty and no process
//     mentions the sandbox on its command line).
//
// Cases live in text tables (tests/debug/hostile/*.cases), one per line:
//
//   CLASS NAME CODES EXPECT [SETUP...] -- ARG...
//
// Words are separated by blanks; '...' quotes literally, "..." quotes with \" and \\ escapes.
//   CLASS   what the case counts as ("output-path", "report-output", "cli-flag", ...)
//   NAME    unique within its file
//   CODES   allowed exit codes, comma-separated, ranges allowed ("2", "0,2", "0,10-19")
//   EXPECT  a fragment stderr must contain; '-' asks for nothing
//   SETUP   prepared in the sandbox before the command, in order:
//             file:NAME=TEXT     a file holding TEXT ("\n" is a newline)
//             copy:NAME=FIXTURE  a copy of a fixture file (see Fixtures)
//             dir:NAME           a directory (parents included)
//             rodir:NAME         a directory without write permission (a root harness runs
//                                the command as root without CAP_DAC_OVERRIDE, so the
//                                mode holds for it)
//             fifo:NAME          a FIFO;   device:NAME  a character device like /dev/null
//                                (a FIFO where mknod is not permitted)
//             link:NAME=TARGET   a symbolic link
//             mayChange:NAME     NAME may be replaced by the command (e.g. `run --force`)
//             fsize:BYTES        RLIMIT_FSIZE of the command (a "disk" that is full)
//             lines:N            allow N lines on stderr instead of 2
//             quiet-stdout:      nothing on stdout (a command that fails prints no report first)
//             env:NAME=VALUE     set NAME in the command's environment ("{d}" and "\n"
//                                expand in VALUE)
//             append:NAME=TEXT   TEXT added at the end of NAME (e.g. of a copied config);
//             prepend:NAME=TEXT  ... at its start;   crlf:NAME  its "\n" become "\r\n"
//                                (file:, append: and prepend: TEXT expand "\n", "\r", "\t",
//                                "\xNN" and "{repeat:N:UNIT}"; quote with '...')
//             signal:SIG@MS      send SIG (INT, TERM, HUP) to the command's process group MS
//                                ms after it started; dying of it (exit status 128+SIG: 130,
//                                143, 129) is then allowed where CODES lists it
//             signal:SIG@tmp     ... the moment the command creates a file whose name has
//                                ".tmp-" in the sandbox (inotify): aims at the instant a
//                                report's temporary file appears
//             mode:NAME=OCTAL    chmod NAME (a root harness runs the command as root
//                                without CAP_DAC_OVERRIDE, so the mode holds for it)
//             sqlitelock:NAME    another process holds SQLite's exclusive lock on NAME
//             flock:NAME         another process holds flock(LOCK_EX) on NAME
//             twice              start the command twice at once; one must succeed (0) and
//                                the other fail with a code of CODES and EXPECT
//             times:N            run the command N times, one after another (each judged)
//             live:MODE=N        a run of N ranks is being written while the command runs
//                                (needs live.toml in the sandbox, a config whose run waits
//                                mid-way; the run file is live.db): MODE `launcher` is
//                                `stagescope run`, `workers` is N `stagescope worker` and a peek
//                                `merge --config` that makes the run file.  The command starts
//                                once every rank committed actions.  Then: the run is still
//                                live, nothing but its shards changed (run file, status, lock),
//                                and once it ends it completed (`merge` judges it, `check`
//                                passes)
//   ARG     arguments after `stagescope`; "{d}" expands to the sandbox directory, "{long}"
//           to a 5000-character file name, "{nl}" to a newline, "{xNN}" to the byte NN (also
//           in SETUP names).
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace stagescope::testing {

struct HostileCase {
  std::string file;  // table it came from, for messages
  int line = 0;
  std::string cls, name;
  std::vector<int> codes;
  std::string expect;  // "" = nothing
  std::vector<std::string> setup;
  std::vector<std::string> args;
};

// The exit codes docs/commands.md "Exit codes (every command)" documents.
const std::vector<int>& documentedExitCodes();

// Parses a case table; throws std::runtime_error naming file:line on a malformed line.
std::vector<HostileCase> loadCases(const std::string& path);

// Files that `copy:` may name (name -> path).
using Fixtures = std::map<std::string, std::string>;

struct CaseRun {
  int exitCode = -1;
  std::string out, err;
};
struct CaseResult {
  std::vector<CaseRun> runs;          // one, or two for `twice`
  std::vector<std::string> failures;  // empty: the case passed
  bool skipped = false;               // a precondition cannot be met here (reason in failures)
  std::string sandbox;
};

// Runs one case: sandbox, setup, command(s), every assertion above.  The sandbox is removed
// when the case passed and kept (its path in the failures) when it did not.
CaseResult runHostileCase(const HostileCase& c, const Fixtures& fixtures, int timeoutSeconds = 120);

// The case runs `run` or `worker`, which builds without the engine do not have.
bool needsEngine(const HostileCase& c);
// The cases of `all` this build can run (all of them when `haveEngine`).
std::vector<HostileCase> runnable(std::vector<HostileCase> all, bool haveEngine);

// "file:line CLASS/NAME" for messages.
std::string label(const HostileCase& c);
// "CLASS_NAME" with every other character as '_': a GoogleTest parameter name.
std::string testNameOf(const HostileCase& c);
// Each command's exit code, stderr and the start of its stdout, for a failure message.
std::string describeRuns(const CaseResult& r);
// GoogleTest prints a case by its label (not its bytes).
void PrintTo(const HostileCase& c, std::ostream* os);

}  // namespace stagescope::testing
