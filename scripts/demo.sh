#!/usr/bin/env bash
# The main job: run the default config (8 CPU ranks over Gloo: encoder "vision" tp2·dp2 on
# ranks 0-3 -> llm tp2·pp2 on ranks 4-7), record it with the single-process reference,
# check it, write a Chrome trace and a comparison report against a second layout, and open
# the viewer on the run when a display is available.
set -euo pipefail
BUILD=${1:-build/default}
EXE="$BUILD/app/stagescope"
mkdir -p runs
RUN=runs/demo.db
OTHER=runs/demo-layout2.db

"$EXE" run assets/configs/default.toml -o "$RUN" --force --reference --check
# The same model and seed on another layout (vision tp1 on rank 0, llm pp4 on ranks 1-4).
"$EXE" run assets/configs/default.toml -o "$OTHER" --force -q \
  --set modules.vision.tp=1 --set modules.vision.dp=1 --set modules.llm.offset=1 \
  --set modules.llm.tp=1 --set modules.llm.pp=4 >/dev/null
"$EXE" compare "$RUN" "$OTHER" --html runs/demo-compare.html --md runs/demo-compare.md >/dev/null
"$EXE" export "$RUN" --chrome-trace runs/demo-trace.json
echo
echo "stagescope:      $EXE   (export PATH=\"$(cd "$(dirname "$EXE")" && pwd):\$PATH\" to type 'stagescope')"
echo "run file:        $RUN   (sqlite3 $RUN 'select kind, count(*) from actions group by kind')"
echo "compare report:  runs/demo-compare.html (vs the tp1/pp4 layout of the same model)"
echo "trace:           runs/demo-trace.json (open in ui.perfetto.dev or chrome://tracing)"
if [ -n "${DISPLAY:-}" ] && [ -z "${CI:-}" ]; then
  echo "opening the viewer on $RUN ..."
  exec "$EXE" gui "$RUN" "$OTHER"
else
  echo "no display: open the viewer later with  $EXE gui $RUN $OTHER"
fi
