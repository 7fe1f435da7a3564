#!/usr/bin/env bash
# The benchmark suite (issue 8): `make bench` -> scripts/bench.sh BUILD_DIR.
#
#   scripts/bench.sh [--smoke] [BUILD_DIR] [-- run_bench.py options, e.g. --parts 1,2]
#   scripts/bench.sh --capture [BUILD_DIR] [-- bench_capture.py options, e.g. --reps 5]
#
# Full run: writes bench/results.md and bench/results.json (about 10 minutes on 2 cores, plus
#           part 7, whose 10^7-event run takes much longer).
# One section alone: scripts/bench.sh build/default -- --parts 7 [--scale-events 1000000]
#           updates that section's rows and keeps the other parts' earlier results.
#   parts: 1 engine vs PyTorch, 2 recording cost, 3 writer, 4 bubble, 5 viewer/reports
#   (bench_gui, bench_compare, bytes per row), 6 scaling, 7 the real `stagescope gui` / check /
#   compare / export paths at 10^6 and 10^7 events (Xvfb; STAGESCOPE_GUI_TIMING), idle and busy,
#   8 resident memory per rank at 8..128 ranks (forked vs exec'd ranks), 9 the default
#   encoder -> LLM layout vs PyTorch Schedule1F1B / ScheduleGPipe over the same three stages,
#   10 in-band verification: step time at record `stats` / `off`, alternating (target <= 1.03;
#   alone: scripts/bench.sh build/default -- --parts 10).
#   Part 1 also reports the machine floor, the efficiency and pre-posted receives on/off.
#   Each section's rows carry the date and load (`uptime`) at which it was measured.
# --smoke:  one tiny repetition of every part into BUILD_DIR/bench-smoke/, then checks that
#           the outputs exist and parse (the CTest test `bench_smoke`, label bench).
# --capture: only the capture backend's overhead (tests/capture/bench_capture.py): a 4-rank
#           torch.distributed.pipelining job through `stagescope` at off/meta/stats/full ÷ the
#           same job on plain Gloo, variants alternating within each repetition; writes
#           BUILD_DIR/bench-capture/capture_overhead.{md,json}.
#
# The PyTorch peer (part 1) needs the project venv's torch importable from Python.  torch is
# installed there with --no-deps (for its C++ LibTorch); the full run installs its pure-Python
# dependencies and the CUDA libraries it links against that /usr/local/cuda lacks (idempotent:
# nothing is installed once `import torch.distributed.pipelining` works).  The smoke run never
# installs anything: without the peer it skips part 1 and says so.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SMOKE=0 CAPTURE=0
if [[ "${1:-}" == "--smoke" ]]; then SMOKE=1; shift; fi
if [[ "${1:-}" == "--capture" ]]; then CAPTURE=1; shift; fi
BUILD="${1:-build/default}"
[[ $# -gt 0 ]] && shift
[[ "${1:-}" == "--" ]] && shift
BUILD="$(cd "$BUILD" 2>/dev/null && pwd || echo "$ROOT/$BUILD")"
[[ -x "$BUILD/app/stagescope" && -x "$BUILD/app/stagescope-engine" ]] ||
  { echo "bench: $BUILD/app/stagescope or stagescope-engine not built (make build)" >&2; exit 2; }

PY=python3
command -v "$PY" >/dev/null || PY="$ROOT/.venv/bin/python"

if [[ $CAPTURE == 1 ]]; then
  [[ -d "$BUILD/python/stagescope_torch" ]] || { echo "bench: $BUILD/python/stagescope_torch not built (python3-dev missing?)" >&2; exit 2; }
  echo "bench: load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
  exec "$ROOT/.venv/bin/python" "$ROOT/tests/capture/bench_capture.py" --build "$BUILD" "$@"
fi

# --- the PyTorch peer --------------------------------------------------------------------------
VENV_PY="$ROOT/.venv/bin/python"
if [[ -d /usr/local/cuda/lib ]]; then
  export LD_LIBRARY_PATH="/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
peer_ok() { "$VENV_PY" -c "import torch.distributed.pipelining" >/dev/null 2>&1; }
PEER="" REASON=""
if [[ ! -x "$VENV_PY" ]]; then
  REASON="no project venv at .venv (scripts/bootstrap.sh)"
elif peer_ok; then
  PEER="$VENV_PY"
elif [[ $SMOKE == 1 ]]; then
  REASON="Python torch not importable from .venv (the full 'make bench' installs its dependencies)"
else
  echo "bench: making the venv's torch importable (pure-Python deps + CUDA runtime wheels)"
  META="$("$VENV_PY" -c 'import importlib.metadata as m; print(m.distribution("torch").locate_file(""))' 2>/dev/null)/torch-2.11.0.dist-info/METADATA"
  pin() { grep -o "^Requires-Dist: $1[^;]*" "$META" 2>/dev/null | sed 's/^Requires-Dist: //; s/ //g' | head -1; }
  CUSPARSELT="$(pin nvidia-cusparselt-cu13)"; NVSHMEM="$(pin nvidia-nvshmem-cu13)"
  "$VENV_PY" -m pip install --quiet filelock typing-extensions sympy networkx jinja2 fsspec numpy || true
  peer_ok || "$VENV_PY" -m pip install --quiet "cuda-toolkit[cufile]==13.0.2" \
      "${CUSPARSELT:-nvidia-cusparselt-cu13==0.8.0}" "${NVSHMEM:-nvidia-nvshmem-cu13==3.4.5}" || true
  if peer_ok; then PEER="$VENV_PY"; else
    REASON="Python torch still not importable after installing its dependencies: $("$VENV_PY" -c 'import torch.distributed.pipelining' 2>&1 | tail -1)"
  fi
fi
[[ -n "$PEER" ]] || echo "bench: SKIP part 1 (engine vs PyTorch pipelining): $REASON"

# --- run ---------------------------------------------------------------------------------------
if [[ $SMOKE == 1 ]]; then
  OUT="$BUILD/bench-smoke"
  rm -rf "$OUT"
  "$PY" "$ROOT/tests/bench/run_bench.py" --build "$BUILD" --out "$OUT" --smoke \
      --peer-python "$PEER" --peer-reason "$REASON" "$@"
  "$PY" - "$OUT" <<'PYEOF'
import json, os, sys
out = sys.argv[1]
r = json.load(open(os.path.join(out, "results.json")))
md = open(os.path.join(out, "results.md")).read()
assert md.startswith("# stagescope benchmarks") and "| # | Measure |" in md, "results.md malformed"
need = {"recording_cost", "pipeline", "scaling", "scale", "ranks", "verification"}
if "multimodule" not in r["skipped"]: need.add("multimodule")
if "engine_vs_pytorch" not in r["skipped"]: need.add("engine_vs_pytorch")
if "writer" not in r["skipped"]: need.add("writer")
missing = need - set(r["parts"])
assert not missing, f"parts missing from results.json: {sorted(missing)}"
for c in r["parts"]["pipeline"]["grid"]:
    assert 0.0 <= c["bubble_mean"] < 1.0 and c["peak_activations"], c
print(f"bench smoke: ok ({len(r['parts'])} parts, skipped: {sorted(r['skipped']) or 'none'})")
PYEOF
else
  echo "bench: load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
  "$PY" "$ROOT/tests/bench/run_bench.py" --build "$BUILD" --out "$ROOT/bench" \
      --peer-python "$PEER" --peer-reason "$REASON" "$@"
fi
