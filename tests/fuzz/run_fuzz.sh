#!/bin/sh
# run_fuzz.sh FUZZER SEED_CORPUS WORKDIR: a bounded libFuzzer run of the run-file reader.
# Exit 77 (CTest SKIP) when the fuzzer was not built (no clang++ / libFuzzer).
fuzzer=$1 seeds=$2 work=$3
if [ ! -x "$fuzzer" ]; then
  echo "SKIP: $fuzzer not built (needs clang++ with -fsanitize=fuzzer,address)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/corpus" "$work/tmp" || exit 1
cd "$work" || exit 1
export TMPDIR="$work/tmp"
# -timeout: one input may not take longer; -rss_limit_mb: nor grow without bound.  Findings
# (crash-*, leak-*, timeout-*) are written to $work.
exec "$fuzzer" -max_total_time=20 -rss_limit_mb=2048 -timeout=10 -max_len=131072 \
  -print_final_stats=1 "$work/corpus" "$seeds"
