#!/usr/bin/env bash
# Regenerates the README's screenshots from real runs (needs xvfb-run):
#   runs/demo.db, runs/demo-layout2.db   the demo's two layouts (scripts/demo.sh makes them)
#   runs/screenshots/nan.db              a NaN planted in the vision->llm activation (it1 mb2)
#   runs/screenshots/killed.db           llm stage 1 SIGKILLed in iteration 1
#   runs/screenshots/hang.db             a dropped llm activation: the receiver hangs
#   runs/screenshots/corrupt.db          one bridge message corrupted after its checksum
#   runs/screenshots/colocated.db        assets/configs/colocated.toml (modules sharing ranks)
# The runs under runs/screenshots are this script's own: it recreates that folder.
set -euo pipefail
BUILD=${1:-build/default}
EXE="$BUILD/app/stagescope"
GUI="$BUILD/ui/stagescope-gui"
OUT=assets/screenshots
RUNS=runs/screenshots
[ -f runs/demo.db ] && [ -f runs/demo-layout2.db ] || CI=1 scripts/demo.sh "$BUILD"
rm -rf "$RUNS"
mkdir -p "$RUNS" "$OUT"
CFG=assets/configs/default.toml
"$EXE" run "$CFG" -o "$RUNS/nan.db" -q \
  --fault nan:iteration=1,microbatch=2,module=vision,direction=activation >/dev/null || true
"$EXE" run "$CFG" -o "$RUNS/killed.db" -q --set timeout_seconds=8 \
  --fault kill:iteration=1,microbatch=1,module=llm,stage=1 >/dev/null || true
"$EXE" run "$CFG" -o "$RUNS/hang.db" -q --set timeout_seconds=5 \
  --fault drop:iteration=1,microbatch=1,module=llm,stage=0,direction=activation >/dev/null || true
"$EXE" run "$CFG" -o "$RUNS/corrupt.db" -q \
  --fault corrupt:iteration=0,microbatch=1,module=vision,direction=activation >/dev/null || true
"$EXE" compare runs/demo.db runs/demo-layout2.db --html "$RUNS/demo-compare.html" >/dev/null || true
"$EXE" compare runs/demo.db "$RUNS/nan.db" --html "$RUNS/nan-compare.html" >/dev/null || true

shot() {  # shot NAME RUN [OTHER] -- script commands...
  local name=$1 run=$2 other=$3
  shift 3
  local args=()
  for c in "$@"; do args+=(--script "$c"); done
  # assets/screenshots/*.png are this script's own output (the viewer replaces only PNGs that
  # carry its own mark, which images written before that mark existed do not).
  rm -f "$OUT/$name.png"
  XDG_CONFIG_HOME="$RUNS/config" xvfb-run -a -s '-screen 0 1600x1000x24' \
    "$GUI" "$run" $other --size 1600x1000 "${args[@]}" --screenshot "$OUT/$name.png" >/dev/null
  rm -f "$OUT/$name.png.probes"
}
# The hero: the demo run against its second layout (the panel states the report's verdict), a
# bridge message in the inspector, the replay back at the end.
shot demo-run-inspector-compare runs/demo.db runs/demo-layout2.db "frames 3" "select-transfer 40" \
  "last" "tab compare"
shot timeline-replay-gridmap runs/demo.db "" "frames 2" "first" "next-iter" "next-mb" "next-mb" \
  "zoom-fit" "tab grid"
shot compare-divergence runs/demo.db runs/screenshots/nan.db "frames 3" "jump-divergence"
shot nan-first-nonfinite "$RUNS/nan.db" "" "frames 2" "jump-nonfinite" "find-nonfinite"
shot inspector-mismatch-find "$RUNS/corrupt.db" "" "frames 2" "select-mismatch" "last" "find-mismatch"
shot killed-rank "$RUNS/killed.db" "" "frames 2" "jump-stuck"
shot hang-wait-for "$RUNS/hang.db" "" "frames 2" "jump-stuck"
shot plots-gradient "$RUNS/nan.db" "" "frames 2" "tab plots"
# Colocated modules: ranks holding several modules' stages (split rows, shared grid cells, a
# local hand-off selected in the inspector).
"$EXE" run assets/configs/colocated.toml -o "$RUNS/colocated.db" -q >/dev/null || true
shot colocated-shared-ranks "$RUNS/colocated.db" "" "frames 2" "select-local" "zoom-fit" "tab grid"
echo "wrote $OUT/*.png"
