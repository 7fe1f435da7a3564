#!/usr/bin/env bash
# Records a real `full` run (with the reference) and recomputes its checksums in Python.
# Usage: full_run_checksums.sh STAGESCOPE_EXE SOURCE_DIR WORK_DIR
# WORK_DIR/checksum-full.db* are this test's own files: removed before the run.
set -euo pipefail
exe=$1 src=$2 work=$3
mkdir -p "$work"
run="$work/checksum-full.db"
rm -f "$run" "$run".*shard*
"$exe" run "$src/assets/configs/single.toml" -o "$run" --record full --reference -q \
  --set iterations=1
python3 "$src/tests/checksum/verify_run_checksums.py" "$run"
