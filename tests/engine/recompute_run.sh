#!/usr/bin/env bash
# Independent recomputation of recorded runs (docs/recompute.md): records one layout at level
# full and runs scripts/recompute.py on it.
#   recompute_run.sh STAGESCOPE SOURCE_DIR WORK_DIR CASE
# CASE: colocated | fan_in | fan_out_sgd | planted | planted_fault | filtered | loss_tolerance |
# sweep_layouts | sweep_bf16 | sweep_seed.  A layout case requires
# MATCH (exit 0); a planted case requires that recompute.py names each planted defect (exit 1).  Exit 77 (ctest
# SKIP) only when the venv's Python cannot import torch.
set -u
BIN=$1 SRC=$2 WORK=$3 CASE=$4
PY=$SRC/.venv/bin/python
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "SKIP: $PY cannot import torch (scripts/bootstrap.sh installs it)"
  exit 77
fi
RECOMPUTE=$SRC/scripts/recompute.py
DIR=$WORK/recompute-$CASE
rm -rf "$DIR" && mkdir -p "$DIR"
fail() { echo "FAIL: $*"; exit 1; }

record() {  # record NAME CONFIG [args...]: a completed level-full run in $DIR/NAME.db
  local name=$1 cfg=$2
  shift 2
  "$BIN" run "$cfg" --record full -q -o "$DIR/$name.db" --set timeout_seconds=300 "$@" \
    >"$DIR/$name.run.txt" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { cat "$DIR/$name.run.txt"; fail "stagescope run $name exited $rc"; }
}

expect() {  # expect RC DB PATTERN...: recompute.py exits RC and prints every PATTERN
  local want=$1 db=$2
  shift 2
  "$PY" "$RECOMPUTE" "$db" >"$db.recompute.txt" 2>&1
  local rc=$?
  cat "$db.recompute.txt"
  [ $rc -eq "$want" ] || fail "recompute.py $db exited $rc, expected $want"
  for p in "$@"; do
    grep -q -- "$p" "$db.recompute.txt" || fail "recompute.py $db: no line matching '$p'"
  done
}
check_names() {  # check_names DB PARAM: check exits 17 and names PARAM's iteration-0 gradient
  local db=$1 param=$2 rc
  "$BIN" check "$db" >"$db.check.txt" 2>&1
  rc=$?
  cat "$db.check.txt"
  [ $rc -eq 17 ] || fail "check of $db exited $rc, expected 17"
  grep -q "gradient of $param iteration 0 differs from the reference" "$db.check.txt" ||
    fail "check of $db does not name $param"
}

case $CASE in
  colocated)  # three stages on ranks 0-1 (two encoders + llm stage 0): local hand-offs
    record run "$SRC/assets/configs/colocated.toml"
    expect 0 "$DIR/run.db" "^iteration 0: MATCH" "^iteration 1: MATCH" "payload"
    ;;
  fan_in)  # vision dp4 -> llm tp2 pp2 dp1, Adam
    record run "$SRC/assets/configs/fan_in.toml"
    expect 0 "$DIR/run.db" "^iteration 0: MATCH" "^iteration 1: MATCH"
    ;;
  fan_out_sgd)  # vision tp2 pp2 dp1 -> llm dp4, SGD with momentum, loss scale 8
    record run "$SRC/assets/configs/fan_out.toml" --set optimizer.kind=sgd \
      --set optimizer.momentum=0.9 --set loss_scale=8
    expect 0 "$DIR/run.db" "^iteration 0: MATCH" "^iteration 1: MATCH"
    ;;
  planted)  # defects a correct engine never produces must be named: edited and lost records
    record run "$SRC/assets/configs/single.toml"
    expect 0 "$DIR/run.db" "^iteration 0: MATCH"
    # 1. one element of one recorded reduced gradient moved by 1e-4 (10x the tolerance)
    cp "$DIR/run.db" "$DIR/grad.db"
    "$PY" - "$DIR/grad.db" <<'EOF' || fail "planting the gradient edit"
import sqlite3, struct, sys
con = sqlite3.connect(sys.argv[1])
gid, payload = con.execute("SELECT id, payload FROM gradients WHERE phase = 'reduced' AND "
                           "iteration = 0 AND param = 'llm.layers.0.mlp.fc1.weight'").fetchone()
b = bytearray(payload)
v, = struct.unpack_from("<f", b, 4 * 7)
struct.pack_into("<f", b, 4 * 7, v + 1e-4)
con.execute("UPDATE gradients_rows SET payload = ? WHERE id = ?", (bytes(b), gid))
con.commit()
EOF
    expect 1 "$DIR/grad.db" "^iteration 0: MISMATCH" \
      "gradient llm.layers.0.mlp.fc1.weight reduced iteration 0 rank 1 .*element \[0, 7\]"
    # (iteration 1 differs too: the optimizer check feeds Adam the recorded gradients, so the
    # edited one moves its state and the next step)
    # 2. one element of one recorded bridge activation (the send side) moved by 1e-3
    cp "$DIR/run.db" "$DIR/payload.db"
    "$PY" - "$DIR/payload.db" <<'EOF' || fail "planting the payload edit"
import sqlite3, struct, sys
con = sqlite3.connect(sys.argv[1])
tid, payload = con.execute("SELECT id, payload FROM transfers WHERE side = 'send' AND "
                           "edge = 'vision->llm' AND direction = 'activation' AND iteration = 1 "
                           "AND microbatch = 2").fetchone()
b = bytearray(payload)
v, = struct.unpack_from("<f", b, 0)
struct.pack_into("<f", b, 0, v + 1e-3)
con.execute("UPDATE transfers_rows SET payload = ? WHERE id = ?", (bytes(b), tid))
con.commit()
EOF
    expect 1 "$DIR/payload.db" "^iteration 0: MATCH" "^iteration 1: MISMATCH" \
      "transfer vision->llm activation iteration 1 microbatch 2 send on rank 0 .*element \[0, 0, 0\]"
    # 3. a lost record: one reduced gradient row and one received message deleted
    cp "$DIR/run.db" "$DIR/lost.db"
    "$PY" - "$DIR/lost.db" <<'EOF' || fail "deleting the records"
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("DELETE FROM gradients_rows WHERE id = (SELECT id FROM gradients WHERE phase = "
            "'reduced' AND iteration = 1 AND param = 'llm.head.weight')")
con.execute("DELETE FROM transfers_rows WHERE id = (SELECT id FROM transfers WHERE side = 'recv' "
            "AND direction = 'gradient' AND iteration = 1 AND microbatch = 3)")
con.commit()
EOF
    expect 1 "$DIR/lost.db" "^iteration 0: MATCH" "^iteration 1: MISMATCH" \
      "gradient reduced iteration 1 rank 1 (llm stage 0): 1 of [0-9]* parameters not recorded (llm.head.weight)" \
      "transfer bridge from vision dp 0 to llm dp 0 gradient iteration 1 microbatch 3: recorded sides \['send'\]"
    ;;
  planted_fault)
    # 4. the engine's own fault injection: a NaN in the activation vision sends in microbatch 1
    "$BIN" run "$SRC/assets/configs/single.toml" --record full -q -o "$DIR/nan.db" \
      --set timeout_seconds=300 --set iterations=1 \
      --fault nan:iteration=0,microbatch=1,module=vision \
      >"$DIR/nan.run.txt" 2>&1
    expect 1 "$DIR/nan.db" "^iteration 0: MISMATCH" \
      "transfer vision->llm activation iteration 0 microbatch 1 send on rank 0"
    # 5. a file recompute cannot judge says so (level stats)
    "$BIN" run "$SRC/assets/configs/single.toml" -q -o "$DIR/stats.db" --set iterations=1 \
      >"$DIR/stats.run.txt" 2>&1 || fail "stats run"
    expect 3 "$DIR/stats.db" "recorded at level 'stats'; recomputation needs level 'full'"
    ;;
  filtered)  # [record] filters: what the filter kept is checked, the rest is named as not checked
    # 1. iterations 0 and 1 of 3: iteration 2 has no inputs recorded
    record its "$SRC/assets/configs/single.toml" --set iterations=3 --set 'record.iterations=[0,1]'
    expect 0 "$DIR/its.db" "^iteration 0: MATCH" "^iteration 1: MATCH" \
      "^iteration 2: NOT CHECKED: no input recorded for vision dp 0 microbatch 0 (record.iterations = \[0, 1\])" \
      "MATCH (0 of 2 iterations differ; 1 not checked: iteration 2"
    # a hostile filter column is one line (exit 3), never a traceback
    cp "$DIR/its.db" "$DIR/its-bad.db"
    "$PY" -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE run SET record_ranks = '1,,x'\"); c.commit()" "$DIR/its-bad.db" || fail "editing record_ranks"
    expect 3 "$DIR/its-bad.db" "^recompute: cannot recompute: .*run.record_ranks = '1,,x': expected a comma-separated list of integers"
    [ "$(wc -l <"$DIR/its-bad.db.recompute.txt")" -eq 1 ] || fail "more than one line for a bad record_ranks"
    # so is a config_text that is not TOML, and one whose microbatches is not a number
    cp "$DIR/its.db" "$DIR/cfg-bad.db"
    "$PY" -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE run SET config_text = 'not toml ['\"); c.commit()" "$DIR/cfg-bad.db" || fail "editing config_text"
    expect 3 "$DIR/cfg-bad.db" "^recompute: cannot recompute: .*run.config_text is not TOML"
    [ "$(wc -l <"$DIR/cfg-bad.db.recompute.txt")" -eq 1 ] || fail "more than one line for a bad config_text"
    cp "$DIR/its.db" "$DIR/mb-bad.db"
    "$PY" -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE run SET config_text = replace(config_text, 'microbatches = 4', 'microbatches = \\\"x\\\"')\"); c.commit()" "$DIR/mb-bad.db" || fail "editing microbatches"
    expect 3 "$DIR/mb-bad.db" "^recompute: cannot recompute: .*malformed run file (TypeError"
    [ "$(wc -l <"$DIR/mb-bad.db.recompute.txt")" -eq 1 ] || fail "more than one line for a bad microbatches"
    # 2. llm pp2 dp2 on ranks 1-4 without rank 4 (its last stage of replica 1): the other
    # replica holds every parameter, so every iteration is checked; rank 4's records are not
    # required, but rank 2's still are
    record ranks "$SRC/assets/configs/single.toml" --set modules.llm.pp=2 --set modules.llm.dp=2 \
      --set modules.llm.layers=2 --set 'record.ranks=[0,1,2,3]'
    expect 0 "$DIR/ranks.db" "^iteration 0: MATCH" "^iteration 1: MATCH" \
      "MATCH (0 of 2 iterations differ)"
    cp "$DIR/ranks.db" "$DIR/ranks-lost.db"
    "$PY" - "$DIR/ranks-lost.db" <<'EOF' || fail "deleting the records"
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("DELETE FROM gradients_rows WHERE id = (SELECT id FROM gradients WHERE phase = "
            "'reduced' AND iteration = 0 AND rank = 2 AND param = 'llm.head.weight')")
con.execute("DELETE FROM transfers_rows WHERE id = (SELECT id FROM transfers WHERE side = 'recv' "
            "AND direction = 'activation' AND iteration = 1 AND microbatch = 0 AND rank = 2)")
con.commit()
EOF
    expect 1 "$DIR/ranks-lost.db" "^iteration 0: MISMATCH" "^iteration 1: MISMATCH" \
      "gradient reduced iteration 0 rank 2 (llm stage 1): 1 of [0-9]* parameters not recorded (llm.head.weight)" \
      "transfer llm:pp0->pp1 dp 0 activation iteration 1 microbatch 0: recorded sides \['send'\], expected send and recv"
    # 3. nothing left to recompute (a module's parameters filtered out): one line, exit 3
    record mods "$SRC/assets/configs/single.toml" --set iterations=1 --set 'record.modules=["llm"]'
    expect 3 "$DIR/mods.db" "no iteration can be recomputed from what the \[record\] filter kept (record.modules = \[llm\])"
    ;;
  loss_tolerance)  # the loss rule |l - l_ref| <= 1e-6 * max(1, |l_ref|), on values from runs
    "$PY" - "$RECOMPUTE" <<'EOF' || fail "loss tolerance"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("recompute", sys.argv[1])
rc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rc)
def mismatches(got, ref):
    v = rc.Verdict(10)
    rc.rel_loss("loss", got, ref, 1e-6, v)
    return len(v.mismatches)
# a correct sweep run (colocated, forward-only, vocab 2): a confident prediction's float32
# cross-entropy is 6e-8 (2.4e-6 relative) from the float64 one, a few ulps of its logits
assert mismatches(0.0252452195, 0.0252451593) == 0, "a correct small loss is a mismatch"
# above 1 the rule stays relative: 5e-6 relative on a loss of 4 is a mismatch
assert mismatches(4.00002, 4.0) == 1, "a loss off by 5e-6 relative passes"
assert mismatches(float("nan"), 4.0) == 1 and mismatches(2e-6, 0.0) == 1
print("loss tolerance: ok")
EOF
    ;;
  sweep_layouts)  # random layouts that exposed a verdict defect: check passes, recompute MATCH
    for cfg in "$SRC"/tests/engine/sweep/*.toml; do
      name=$(basename "$cfg" .toml)
      "$BIN" run "$cfg" --record full --reference --check -q -o "$DIR/$name.db" \
        --set timeout_seconds=300 >"$DIR/$name.run.txt" 2>&1
      rc=$?
      [ $rc -eq 0 ] || { cat "$DIR/$name.run.txt"; fail "$name: run --check exited $rc"; }
      expect 0 "$DIR/$name.db" "^iteration 0: MATCH"
    done
    ;;
  sweep_bf16)  # random bfloat16 layouts that check failed while correct (docs/analysis.md,
    # "bfloat16"): check passes and recompute.py says MATCH; the same file with one reduced
    # gradient scaled by 1.5 fails both, scaled by 1.2 fails check, and so does a bfloat16 run
    # with two TP shards swapped
    for cfg in "$SRC"/tests/engine/sweep_bf16/*.toml; do
      name=$(basename "$cfg" .toml)
      "$BIN" run "$cfg" --record full --reference --check -q -o "$DIR/$name.db" \
        --set timeout_seconds=300 >"$DIR/$name.run.txt" 2>&1
      rc=$?
      cat "$DIR/$name.run.txt"
      [ $rc -eq 0 ] || fail "$name: run --check exited $rc"
      grep -q "PASS  reference_gradient" "$DIR/$name.run.txt" || fail "$name: reference_gradient did not pass"
      expect 0 "$DIR/$name.db" "^iteration 0: MATCH" "^iteration 1: MATCH" "^iteration 2: MATCH"
      cp "$DIR/$name.db" "$DIR/$name-scaled.db"
      "$PY" - "$DIR/$name-scaled.db" <<'PY' || fail "$name: planting the scaled gradient"
import sqlite3, sys, torch
con = sqlite3.connect(sys.argv[1])
rows = con.execute("SELECT id, payload FROM gradients WHERE phase = 'reduced' AND iteration = 0 "
                   "AND param = 'llm.head.weight' AND dtype = 'bfloat16'").fetchall()
assert rows, "no reduced bfloat16 llm.head.weight in iteration 0"
for rid, payload in rows:  # every copy, so that whichever check gathers is scaled
    t = torch.frombuffer(bytearray(payload), dtype=torch.bfloat16) * 1.5
    con.execute("UPDATE gradients_rows SET payload = ? WHERE id = ?",
                (t.view(torch.uint8).numpy().tobytes(), rid))
con.commit()
PY
      check_names "$DIR/$name-scaled.db" llm.head.weight
      expect 1 "$DIR/$name-scaled.db" "^iteration 0: MISMATCH" \
        "gradient llm.head.weight reduced iteration 0: relative L2"
      # x 1.2, its accumulated gradients too (a consistent wrong gradient): inside the relative
      # L2 bound max(0.2, 3 x d), caught by its scale along the reference (docs/analysis.md,
      # "bfloat16: the scale of a gradient")
      cp "$DIR/$name.db" "$DIR/$name-x1.2.db"
      "$PY" - "$DIR/$name-x1.2.db" <<'PY' || fail "$name: planting the x1.2 gradient"
import sqlite3, sys, torch
con = sqlite3.connect(sys.argv[1])
rows = con.execute("SELECT id, payload FROM gradients WHERE phase IN ('reduced', 'accumulated') "
                   "AND iteration = 0 AND param = 'llm.head.weight' AND dtype = 'bfloat16'").fetchall()
assert len(rows) >= 2, "no reduced and accumulated bfloat16 llm.head.weight in iteration 0"
for rid, payload in rows:
    t = torch.frombuffer(bytearray(payload), dtype=torch.bfloat16) * 1.2
    con.execute("UPDATE gradients_rows SET payload = ? WHERE id = ?",
                (t.view(torch.uint8).numpy().tobytes(), rid))
con.commit()
PY
      "$BIN" check "$DIR/$name-x1.2.db" >"$DIR/$name-x1.2.check.txt" 2>&1
      rc=$?
      cat "$DIR/$name-x1.2.check.txt"
      [ $rc -eq 17 ] || fail "check of $name-x1.2 exited $rc, expected 17"
      grep -q "gradient of llm.head.weight iteration 0 is the reference's x 1.2 along it" \
        "$DIR/$name-x1.2.check.txt" || fail "check of $name-x1.2 does not name its scale"
    done
    # two TP shards of one reduced gradient swapped (every copy) in a bfloat16 fan_out run
    record swap "$SRC/assets/configs/fan_out.toml" --set 'dtype="bfloat16"' --set iterations=1 \
      --reference
    "$PY" - "$DIR/swap.db" <<'PY' || fail "planting the swapped shards"
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
param = "vision.layers.0.mlp.fc1.weight"
shards = {}
for rid, tp, dp, payload in con.execute(
        "SELECT id, tp, dp, payload FROM gradients WHERE phase = 'reduced' AND iteration = 0 "
        "AND param = ? AND partition_dim >= 0", (param,)):
    shards.setdefault(dp, {})[tp] = (rid, payload)
assert shards and all(sorted(d) == [0, 1] for d in shards.values()), shards.keys()
for d in shards.values():
    (a, pa), (b, pb) = d[0], d[1]
    con.execute("UPDATE gradients_rows SET payload = ? WHERE id = ?", (pb, a))
    con.execute("UPDATE gradients_rows SET payload = ? WHERE id = ?", (pa, b))
con.commit()
PY
    check_names "$DIR/swap.db" vision.layers.0.mlp.fc1.weight
    expect 1 "$DIR/swap.db" "gradient vision.layers.0.mlp.fc1.weight reduced iteration 0: relative L2"
    ;;
  sweep_seed)  # a bounded run of the random-layout sweep: two layouts of a fixed seed (a
    # colocated fan-out 1->2 with Adam over 3 iterations, a colocated tp 3 fan-out 1->3), each
    # with --reference --check and recompute.py; the sweep fails unless both pass on both
    STAGESCOPE_BIN="$BIN" "$PY" "$SRC/scripts/layout_sweep.py" --runs 2 --seed 27 --max-ranks 4 --recompute \
      --keep "$DIR" >"$DIR/sweep.txt" 2>&1
    rc=$?
    cat "$DIR/sweep.txt"
    [ $rc -eq 0 ] || fail "layout_sweep.py exited $rc"
    [ "$(grep -c '^ok: .* recompute MATCH ' "$DIR/sweep.txt")" -eq 2 ] || fail "not 2 layouts MATCH"
    grep -q "^2 runs, 0 failed" "$DIR/sweep.txt" || fail "no '2 runs, 0 failed' line"
    ;;
  *) fail "unknown case $CASE" ;;
esac
echo "PASS: recompute $CASE"
