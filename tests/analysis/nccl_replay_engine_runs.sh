#!/bin/sh
# No false alarms from the NCCL replay on stagescope's own runs: real engine runs of four shipped
# layouts (a bridge, two encoders of unequal depth, colocated modules, a 4-stage pipeline), each
# checked; nccl_replay must PASS and check exit 0.  Usage: nccl_replay_engine_runs.sh STAGESCOPE
# REPO.  Every run has a 120 s timeout; the scratch directory is removed on exit.
set -eu
BIN=$1
REPO=$2
DIR=$(mktemp -d "${TMPDIR:-/tmp}/stagescope-nccl-replay.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
for cfg in single two_encoders colocated llm_pp4; do
  if ! timeout 120 "$BIN" run "$REPO/assets/configs/$cfg.toml" -o "$DIR/$cfg.db" -q >"$DIR/$cfg.log" 2>&1; then
    echo "FAIL $cfg: the run did not complete:"; cat "$DIR/$cfg.log"; exit 1
  fi
  status=0
  timeout 120 "$BIN" check "$DIR/$cfg.db" >"$DIR/$cfg.check" 2>&1 || status=$?
  if [ "$status" -ne 0 ] || ! grep -q '^  PASS  nccl_replay ' "$DIR/$cfg.check"; then
    echo "FAIL $cfg: check exit $status, nccl_replay not PASS:"; cat "$DIR/$cfg.check"; exit 1
  fi
  echo "ok   $cfg: $(grep '^  PASS  nccl_replay ' "$DIR/$cfg.check" | cut -c39-160)"
done
