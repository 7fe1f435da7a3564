#!/bin/sh
# torchrun_killed_rank.sh STAGESCOPE CONFIG TORCHRUN (CONFIG places 3 ranks): a rank SIGKILLed under torchrun (one host)
# is diagnosed as killed, with its host, pid and fate, by every surviving rank and by `merge`.
#
# torchrun starts the config's ranks (`--standalone`, its c10d rendezvous and agent store);
# rank 2 kills itself with SIGKILL in iteration 1 (a `kill` fault: it records nothing).  The
# surviving ranks learn it from the heartbeats in the store and from /proc (same host): the
# first line each of them prints must be "stagescope: rank R: root cause: rank 2 (host H, pid P)
# stopped heartbeating ... process gone: killed by ...", never a hang or "without a record" of
# another rank; torchrun's error files (its summary) start with the same root cause; and
# `stagescope merge --config` marks the run failed naming rank 2, with the survivors'
# `peer_dead` rows in the run file.  Whether a survivor ends by a lost connection, a timeout or
# torchrun's SIGTERM (its agent stops the other ranks when one dies), the verdict is the same.
# Exit 77 (CTest SKIP) without torchrun.
set -u
exe=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # absolute: the script works in a temporary folder
config=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
torchrun=$3
if [ ! -x "$torchrun" ]; then
  echo "SKIP: no torchrun at $torchrun (the project's venv)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/stagescope-trkill-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
fail() {
  echo "FAIL: $*"
  [ -f "$work/torchrun.log" ] && { echo "--- torchrun"; tail -40 "$work/torchrun.log"; }
  for f in $(find "$work/logs" -name '*.log' 2>/dev/null); do echo "--- $f"; tail -5 "$f"; done
  exit 1
}

# A generous timeout: on a busy machine the survivors must not time out before the kill.
sed 's/^timeout_seconds = .*/timeout_seconds = 60/' "$config" >"$work/config.toml"
printf '\n[[faults]]\nkind = "kill"\nrank = 2\niteration = 1\n' >>"$work/config.toml"

cd "$work" || fail "cd $work"
timeout 240 "$torchrun" --standalone --nproc-per-node 3 --log-dir logs --redirects 3 \
  --no-python "$exe" worker config.toml --out run.db >torchrun.log 2>&1
rc=$?
[ $rc -ne 0 ] || fail "torchrun succeeded although rank 2 was killed"
[ $rc -ne 124 ] || fail "torchrun did not end within 240 s (a hang)"

# Per-rank logs: logs/<run id>/attempt_0/<local rank>/stderr.log (one host: local = global).
for r in 0 1; do
  log=$(find logs -path "*/attempt_0/$r/stderr.log" | head -n 1)
  [ -n "$log" ] || fail "no stderr log for rank $r"
  first=$(grep -v '^\[[WIE][0-9]' "$log" | grep -m 1 .)  # torch's own c10 log lines aside
  echo "rank $r: $first"
  case "$first" in
    "stagescope: rank $r: root cause: rank 2 (host "*", pid "*") stopped heartbeating at "*"process gone: "*) ;;
    *) fail "rank $r's first line does not name rank 2's death: $first" ;;
  esac
  case "$first" in *"waits for"*) fail "rank $r names a wait before the root cause" ;; esac
  err=$(find logs -path "*/attempt_0/$r/error.json" | head -n 1)
  [ -n "$err" ] || fail "rank $r wrote no TORCHELASTIC_ERROR_FILE"
  grep -q "rank $r: root cause: rank 2 (host " "$err" || fail "rank $r's error file: $(cat "$err")"
done
grep -q "Signal 9 (SIGKILL) received by PID" torchrun.log || fail "torchrun did not see the SIGKILL"

"$exe" merge run.db --config config.toml >merge.txt 2>&1
mrc=$?
cat merge.txt
[ $mrc -eq 10 ] || fail "merge exit code $mrc, expected 10 (a failed run)"
grep -q "run failed: rank 2 (host .*, pid [0-9]*) stopped heartbeating at .*process gone: killed by" merge.txt ||
  fail "merge does not name rank 2 as killed"
! grep -q "run hung" merge.txt || fail "merge calls the run hung"
if command -v sqlite3 >/dev/null 2>&1; then
  n=$(sqlite3 run.db "SELECT count(DISTINCT rank) FROM diagnoses WHERE kind = 'peer_dead' AND waits_on_rank = 2")
  [ "$n" -ge 1 ] || fail "no survivor recorded rank 2's death (peer_dead rows: $n)"
  k=$(sqlite3 run.db "SELECT count(*) FROM diagnoses WHERE kind = 'rank_killed' AND rank = 2")
  [ "$k" = 1 ] || fail "merge recorded $k rank_killed rows for rank 2, expected 1 (its fate)"
  status=$(sqlite3 run.db "SELECT status FROM run")
  [ "$status" = failed ] || fail "run status '$status', expected failed"
fi
echo "PASS"
