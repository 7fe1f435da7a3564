#!/bin/sh
# doc_recipes.sh STAGESCOPE DOC CONFIG TORCHRUN: the many-host recipes of DOC (docs/multi-host.md)
# executed as printed, so that the documented commands cannot rot.
#
# A recipe is the fenced block after a line "<!-- recipe: NAME -->".  Each runs in a sandbox
# where `stagescope` and `torchrun` are on PATH and config.toml is CONFIG (4 ranks):
#   torchrun  run twice at once, NODE_RANK=0 and 1, HEAD_NODE=127.0.0.1: two torchrun "nodes"
#             on this machine, c10d rendezvous, 2 ranks each;
#   sbatch    the batch script run by sh with the variables sbatch exports for
#             `--nodes=2 --ntasks-per-node=2` (read from its #SBATCH lines), and `srun` and
#             `scontrol` from a small local shim (Slurm is not installed here): the shim's srun
#             starts SLURM_NTASKS tasks, each with SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID,
#             SLURM_NTASKS, SLURM_STEP_ID as srun sets them, and fails when a task fails;
#   merge     after each of the two, in the same sandbox.
# Each run must complete, and be bitwise equal to `stagescope run` of the same config
# (`check --against`).  Exit 77 (CTest SKIP) without torchrun (the Slurm part still runs).
set -u
exe=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
doc=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
config=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
torchrun=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/stagescope-recipes-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
fail() {
  echo "FAIL: $*"
  for f in "$work"/*/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -15 "$f"; }; done
  exit 1
}

# recipe NAME: the block after its marker, without the fences.
recipe() {
  awk -v m="<!-- recipe: $1 -->" '
    $0 == m { armed = 1; next }
    armed && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$doc"
}
for name in torchrun sbatch merge; do
  [ -n "$(recipe $name)" ] || fail "$doc has no recipe '$name' (a fenced block after <!-- recipe: $name -->)"
done

# The reference: the same config on one host, by our own launcher.
"$exe" run "$config" -o "$work/single.db" -q >"$work/single.txt" 2>&1 || fail "one-host run: $(tail -3 "$work/single.txt")"

# sandbox DIR: PATH with stagescope (and torchrun, and the Slurm shim), config.toml, runs/.
sandbox() {
  mkdir -p "$1/bin" "$1/runs"
  ln -s "$exe" "$1/bin/stagescope"
  [ -x "$torchrun" ] && ln -s "$torchrun" "$1/bin/torchrun"
  cp "$config" "$1/config.toml"
}

merged_equal() {  # DIR: the merge recipe as printed, then bitwise equal to the one-host run
  (cd "$1" && PATH="$1/bin:$PATH" sh -c "$(recipe merge)") >"$1/merge.log" 2>&1 ||
    fail "$2: the merge recipe failed"
  grep -q "run completed" "$1/merge.log" || fail "$2: merge did not mark the run completed"
  "$exe" check "$1/runs/myrun.db" --against "$work/single.db" >"$1/check.log" 2>&1 ||
    fail "$2: the merged run differs from the one-host run"
  echo "$2: completed, merged, bitwise equal to the one-host run"
}

# --- sbatch ---------------------------------------------------------------------------------
s="$work/slurm"
sandbox "$s"
recipe sbatch >"$s/job.sh"
nodes=$(sed -n 's/^#SBATCH --nodes=\([0-9]*\).*/\1/p' "$s/job.sh")
pernode=$(sed -n 's/^#SBATCH --ntasks-per-node=\([0-9]*\).*/\1/p' "$s/job.sh")
[ -n "$nodes" ] && [ -n "$pernode" ] || fail "the sbatch recipe has no --nodes / --ntasks-per-node"
cat >"$s/bin/scontrol" <<'EOF'
#!/bin/sh
# Shim of `scontrol show hostnames LIST`: one host per line (comma-separated names).
[ "$1 $2" = "show hostnames" ] || { echo "scontrol shim: only 'show hostnames'" >&2; exit 2; }
echo "$3" | tr ',' '\n'
EOF
cat >"$s/bin/srun" <<'EOF'
#!/bin/sh
# Shim of srun inside an allocation: SLURM_NTASKS tasks of COMMAND, with the per-task variables
# srun sets; exits non-zero when a task does.
pids=""
i=0
while [ "$i" -lt "$SLURM_NTASKS" ]; do
  SLURM_PROCID=$i SLURM_LOCALID=$((i % SLURM_NTASKS_PER_NODE)) SLURM_NODEID=$((i / SLURM_NTASKS_PER_NODE)) \
    SLURM_STEP_ID=0 SLURM_STEPID=0 SLURM_STEP_NUM_TASKS=$SLURM_NTASKS "$@" &
  pids="$pids $!"
  i=$((i + 1))
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
exit $rc
EOF
chmod +x "$s/bin/scontrol" "$s/bin/srun"
(cd "$s" && env PATH="$s/bin:$PATH" SLURM_JOB_ID=4242 SLURM_JOBID=4242 SLURM_JOB_NODELIST=localhost \
  SLURM_NNODES="$nodes" SLURM_JOB_NUM_NODES="$nodes" SLURM_NTASKS=$((nodes * pernode)) \
  SLURM_NPROCS=$((nodes * pernode)) SLURM_NTASKS_PER_NODE="$pernode" \
  timeout 300 sh job.sh) >"$s/job.log" 2>&1 || fail "the sbatch recipe failed"
merged_equal "$s" "sbatch recipe ($nodes nodes x $pernode tasks, srun shim)"

# --- torchrun -------------------------------------------------------------------------------
if [ ! -x "$torchrun" ]; then
  echo "SKIP: no torchrun at $torchrun (the project's venv): the torchrun recipe was not run"
  exit 77
fi
t="$work/torchrun"
sandbox "$t"
for n in 0 1; do
  (cd "$t" && env PATH="$t/bin:$PATH" NODE_RANK=$n HEAD_NODE=127.0.0.1 \
    timeout 300 sh -c "$(recipe torchrun)") >"$t/node$n.log" 2>&1 &
  eval "node$n=\$!"
done
# shellcheck disable=SC2154
wait "$node0" || fail "torchrun node 0 failed"
wait "$node1" || fail "torchrun node 1 failed"
! grep -l "failed to bind" "$t"/node*.log || fail "a torchrun rank logged a bind error"
merged_equal "$t" "torchrun recipe (2 nodes x 2 ranks on this machine)"
echo "PASS"
