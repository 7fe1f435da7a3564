#!/bin/sh
# quiet_progress.sh STAGESCOPE CONFIG: `run --quiet` on a terminal (a pty from script(1)) shows
# the run's progress as one redrawn line ("\r[rank N] iteration ... (k/total, ...)") and nothing
# else of the ranks; through a pipe it stays silent about the ranks.  SKIP (77) without script.
exe=$1 config=$2
command -v script >/dev/null || { echo "SKIP: script(1) is not installed"; exit 77; }
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail=0
script -qec "$exe run $config -o tty.db --set iterations=4 -q" /dev/null >tty.txt 2>&1 ||
  { echo "FAIL: the run under a pty failed:"; cat tty.txt; exit 1; }
for k in 1 2 3 4; do
  grep -q "$(printf '\r')\[rank [0-9]*\] iteration $((k - 1)) .*($k/4, " tty.txt ||
    { echo "FAIL: no redrawn progress line for iteration $k of 4"; fail=1; }
done
grep -q '^\[rank' tty.txt && { echo "FAIL: a rank line was forwarded under --quiet"; fail=1; }
"$exe" run "$config" -o pipe.db --set iterations=2 -q >pipe.txt 2>&1 ||
  { echo "FAIL: the piped run failed:"; cat pipe.txt; exit 1; }
grep -q '\[rank' pipe.txt &&
  { echo "FAIL: progress shown through a pipe under --quiet:"; cat pipe.txt; fail=1; }
[ $fail -eq 0 ] || { echo "--- the pty's output:"; od -c tty.txt | head -40; exit 1; }
echo "ok: --quiet shows the progress on a terminal only"
