#!/usr/bin/env bash
# The sanitizer pass of `make test`: the torch-free part of stagescope - storage, model,
# analysis, report, plan and the `stagescope` commands plan/check/compare/export/merge - built
# with AddressSanitizer + UndefinedBehaviorSanitizer (preset `sanitize`, build/sanitize), then
# its whole suite: the storage/report/plan unit tests and the hostile-input corpus
# (tests/debug/hostile/*.cases) minus the cases of `run`/`worker`, which need the engine and
# run in the main pass.  The corpus' fixture run files are made by the main build's stagescope
# (argument 1), whose `run` execs the stagescope-engine next to it.  Any sanitizer finding fails
# the test that hit it.
set -euo pipefail
cd "$(dirname "$0")/.."
fixture_exe=$(realpath "${1:-build/default/app/stagescope}")
jobs=${JOBS:-2}
build=build/sanitize
if [ ! -x "$fixture_exe" ]; then
  echo "sanitize.sh: $fixture_exe: no stagescope with the engine to make fixture runs; build it first (make build)" >&2
  exit 2
fi
if [ ! -x "$(dirname "$fixture_exe")/stagescope-engine" ]; then
  echo "sanitize.sh: $(dirname "$fixture_exe")/stagescope-engine: missing; the fixture runs need the engine next to $fixture_exe (make build)" >&2
  exit 2
fi
test -f "$build/build.ninja" ||
  cmake --preset sanitize -DSTAGESCOPE_FIXTURE_STAGESCOPE="$fixture_exe" >/dev/null
cmake --build "$build" -j "$jobs"
# A finding exits 86/87 (never a documented stagescope exit code) after its report on stderr.
export ASAN_OPTIONS="exitcode=86:detect_leaks=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="exitcode=87:print_stacktrace=1:halt_on_error=1"
ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 600
