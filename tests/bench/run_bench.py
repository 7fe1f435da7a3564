#!/usr/bin/env python3
"""The stagescope benchmark suite (issue 8).  Standard library only; driven by scripts/bench.sh.

  run_bench.py --build BUILD_DIR --out bench [--smoke] [--peer-python PY]

Writes OUT/results.json and OUT/results.md.  Every performance claim is a ratio of runs made
side by side in this one invocation: alternating order, several repetitions, medians.  No
timing assertions: the only failures are broken tools, missing outputs and a loss mismatch
between stagescope and the PyTorch peer.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ITER_RE = re.compile(r"\[rank (\d+)\] iteration (\d+)\s+loss (\S+)\s+time (\S+) s")
LOSS_TOL = 1e-5
# Part 4's model (llm only, on assets/configs/llm_pp4.toml): big enough that F/B compute, not
# per-message overhead, fills the stages, so the bubble can be held against (p-1)/(m+p-1).
PIPE_MODEL = {"layers": 8, "hidden": 128, "heads": 4, "ffn": 512, "text_len": 32}


def log(msg):
    print(msg, flush=True)


def load():
    return round(os.getloadavg()[0], 2)


def prepost_default(ranks=4):
    """What STAGESCOPE_PREPOST=auto picks for part 1's 4 ranks here (core/engine/PrepostPolicy.h)."""
    return "on" if ranks <= len(os.sched_getaffinity(0)) else "off"


def median(xs):
    return statistics.median(xs) if xs else None


class Bench:
    def __init__(self, a):
        self.a = a
        self.exe = os.path.join(a.build, "app", "stagescope")
        self.tmp = tempfile.mkdtemp(prefix="stagescope-bench-")
        self.results = {"parts": {}, "skipped": {}}
        prev = os.path.join(a.out, "results.json")  # earlier results, kept for parts not re-run
        prev = json.load(open(prev)) if os.path.exists(prev) else {}
        self.previous = prev.get("parts", {})
        self.n = 0
        self.runfile_stats = None

    # -- running stagescope ------------------------------------------------------------------
    def stagescope(self, config, sets, record, keep=False, name=None, env=None):
        """One `stagescope run`; returns {times, losses, file, bytes, seconds}."""
        self.n += 1
        out = os.path.join(self.tmp, (name or f"run{self.n}") + ".db")
        cmd = [self.exe, "run", os.path.join(ROOT, config), "-o", out, "--record", record]
        for s in sets:
            cmd += ["--set", s]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, **env) if env else None)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        its = sorted((int(m[2]), float(m[3]), float(m[4])) for m in ITER_RE.finditer(p.stdout))
        res = {"times": [t for _, _, t in its], "losses": [l for _, l, _ in its],
               "file": out, "bytes": os.path.getsize(out), "seconds": wall}
        for f in os.listdir(self.tmp):  # shards are merged; keep only the run file
            if f.startswith(os.path.basename(out) + ".rank"):
                os.remove(os.path.join(self.tmp, f))
        if not keep:
            res["bytes"] = os.path.getsize(out)
        return res

    def drop(self, run):
        for suffix in ("", ".config.toml", "-wal", "-shm"):
            try:
                os.remove(run["file"] + suffix)
            except FileNotFoundError:
                pass

    def step_time(self, times):
        """Median per-iteration time, skipping warm-up iterations (first two, or the first)."""
        skip = 2 if len(times) > 4 else (1 if len(times) > 1 else 0)
        return median(times[skip:])

    # -- part 1: engine vs torch.distributed.pipelining --------------------------------------
    def part_torch(self):
        a = self.a
        if not a.peer_python:
            self.results["skipped"]["engine_vs_pytorch"] = a.peer_reason or "PyTorch peer unavailable"
            log(f"SKIP part 1 (engine vs PyTorch pipelining): {self.results['skipped']['engine_vs_pytorch']}")
            return
        sizes = {
            "small": dict(layers=4, hidden=32, heads=4, ffn=64, vocab=64, text_len=8,
                          microbatches=8, mbs=2, iterations=3 if a.smoke else 40),
            "large": dict(layers=4, hidden=256, heads=8, ffn=1024, vocab=1024, text_len=32,
                          microbatches=8, mbs=4, iterations=3 if a.smoke else 10),
        }
        if a.smoke:
            sizes = {"small": sizes["small"]}
        reps_of = {"small": 5, "large": 3}
        out = {"pp": 4, "reps": reps_of, "sizes": {}}
        self.results["parts"]["engine_vs_pytorch"] = out

        def sets_for(s, iterations):
            return [f"iterations={iterations}", f"microbatches={s['microbatches']}",
                    f"micro_batch_size={s['mbs']}", "modules.llm.pp=4",
                    f"modules.llm.layers={s['layers']}", f"modules.llm.hidden={s['hidden']}",
                    f"modules.llm.heads={s['heads']}", f"modules.llm.ffn={s['ffn']}",
                    f"modules.llm.vocab={s['vocab']}", f"modules.llm.text_len={s['text_len']}"]

        def peer(s, iterations, extra=()):
            cmd = [a.peer_python, os.path.join(ROOT, "tests", "bench", "torch_pipeline_1f1b.py"),
                   "--pp", "4", "--iterations", str(iterations)]
            for k in ("layers", "hidden", "heads", "ffn", "vocab", "text_len", "microbatches", "mbs"):
                cmd += ["--" + k.replace("_", "-"), str(s[k])]
            cmd += list(extra)
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            wall = time.perf_counter() - t0
            if p.returncode != 0:
                raise RuntimeError(f"PyTorch peer failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
            return p.stdout, wall

        for size, s in sizes.items():
            entry = {"config": s}
            out["sizes"][size] = entry
            # 1. Same weights, same loss -- before any timing.
            check = self.stagescope("assets/configs/llm_pp4.toml", sets_for(s, 2) + ["record.iterations=[0]"],
                                    "full", name=f"check-{size}")
            con = sqlite3.connect(check["file"])
            loss_ss = con.execute("SELECT loss FROM losses WHERE iteration=0 AND microbatch=-1").fetchone()[0]
            con.close()
            pout, _ = peer(s, 2, ["--verify-runfile", check["file"]])
            weights = json.loads(pout.split("VERIFY ", 1)[1].splitlines()[0])
            py = json.loads(pout.split("RESULT ", 1)[1])
            rel0 = abs(py["losses"][0] - loss_ss) / abs(loss_ss)
            rel1 = abs(py["losses"][1] - check["losses"][1]) / abs(check["losses"][1])
            entry["loss_check"] = {"stagescope_loss_it0": loss_ss, "pytorch_loss_it0": py["losses"][0],
                                   "rel_diff_it0": rel0, "rel_diff_it1_printed": rel1,
                                   "weights_max_abs_diff": weights["max_abs_diff"],
                                   "params_compared": weights["params"]}
            self.drop(check)
            log(f"part 1 [{size}] loss check: stagescope {loss_ss:.7f}  pytorch {py['losses'][0]:.7f}  "
                f"rel {rel0:.2e} (it1 {rel1:.2e}); weights max|diff| {weights['max_abs_diff']}")
            if not rel0 < LOSS_TOL:
                raise RuntimeError(f"loss mismatch at size {size}: rel diff {rel0} >= {LOSS_TOL}")
            # 2. Timing, alternating which system goes first.
            # Three systems per repetition, the order rotating: stagescope (its default,
            # STAGESCOPE_PREPOST=auto), PyTorch, and stagescope with pre-posted receives forced on
            # (STAGESCOPE_PREPOST=1: the ablation; auto is off here when ranks outnumber cores).
            ss_t, py_t, ratios, ss0_t, prepost_ratios = [], [], [], [], []
            systems = ["ss", "py", "ss0"]
            for r in range(1 if a.smoke else reps_of[size]):
                order = systems[r % 3:] + systems[:r % 3]
                got = {}
                if a.smoke:  # one tiny repetition: the peer's timing comes from the check run
                    order = ["ss", "ss0"]
                    got["py"] = self.step_time(py["times"])
                for who in order:
                    if who in ("ss", "ss0"):
                        env = {"STAGESCOPE_PREPOST": "1"} if who == "ss0" else None
                        run = self.stagescope("assets/configs/llm_pp4.toml", sets_for(s, s["iterations"]), "off",
                                              env=env)
                        got[who] = self.step_time(run["times"])
                        self.drop(run)
                    else:
                        pout, _ = peer(s, s["iterations"])
                        got["py"] = self.step_time(json.loads(pout.split("RESULT ", 1)[1])["times"])
                ss_t.append(got["ss"])
                py_t.append(got["py"])
                ss0_t.append(got["ss0"])
                ratios.append(got["ss"] / got["py"])
                prepost_ratios.append(got["ss0"] / got["ss"])
                log(f"part 1 [{size}] rep {r}: stagescope {got['ss']*1e3:.2f} ms  pytorch {got['py']*1e3:.2f} ms  "
                    f"ratio {ratios[-1]:.3f}; pre-posted receives forced on {got['ss0']*1e3:.2f} ms "
                    f"(forced on / default {prepost_ratios[-1]:.3f})  (load {load()})")
            entry.update(stagescope_step_s=ss_t, pytorch_step_s=py_t, ratios=ratios,
                         ratio_median=median(ratios), prepost_on_step_s=ss0_t,
                         prepost_default=prepost_default(),
                         prepost_ratios=prepost_ratios, prepost_ratio_median=median(prepost_ratios),
                         load=load())
            # Where stagescope's step time goes: mean ms per iteration by action kind (meta run).
            if a.smoke:
                continue
            run = self.stagescope("assets/configs/llm_pp4.toml", sets_for(s, 3 if a.smoke else 10), "meta")
            entry["stagescope_breakdown_ms"] = self.breakdown(run["file"])
            self.drop(run)
            log(f"part 1 [{size}] stagescope ms/iteration by kind: {entry['stagescope_breakdown_ms']}")
            # The machine floor: every rank's compute (F + B) must run on min(cores, ranks)
            # cores, so no schedule finishes an iteration faster than sum(compute) / that.
            bd = entry["stagescope_breakdown_ms"]
            compute = sum(k.get("F", 0) + k.get("B", 0) for k in bd.values())
            cores = min(os.cpu_count(), len(bd))
            entry["floor_ms"] = compute / cores
            entry["compute_ms_sum"] = compute
            entry["floor_cores"] = cores
            entry["efficiency"] = entry["floor_ms"] / (median(ss_t) * 1e3)
            log(f"part 1 [{size}] floor {entry['floor_ms']:.1f} ms (sum of F+B {compute:.1f} ms / {cores} cores); "
                f"efficiency {entry['efficiency']:.2f}")

    def breakdown(self, path):
        """{rank: {kind: mean ms per iteration}} over iterations after the first."""
        con = sqlite3.connect(path)
        rows = con.execute("SELECT rank, kind, SUM(end_ns - start_ns) / 1e6, COUNT(DISTINCT iteration) "
                           "FROM actions WHERE iteration > 0 GROUP BY rank, kind ORDER BY rank, kind").fetchall()
        span = con.execute("SELECT rank, AVG(t) FROM (SELECT rank, iteration, (MAX(end_ns) - MIN(start_ns)) / 1e6 AS t "
                           "FROM actions WHERE iteration > 0 GROUP BY rank, iteration) GROUP BY rank").fetchall()
        con.close()
        out = {}
        for rank, kind, ms, n in rows:
            out.setdefault(str(rank), {})[kind] = round(ms / n, 2)
        for rank, ms in span:
            out.setdefault(str(rank), {})["iteration"] = round(ms, 2)
        return out

    # -- part 2: recording cost ----------------------------------------------------------------
    def part_recording(self):
        a = self.a
        iters = 3 if a.smoke else 30
        reps = 1 if a.smoke else 5
        levels = ["off", "meta", "stats", "full"]
        times = {l: [] for l in levels}
        sizes = {l: [] for l in levels}
        ratios = {l: [] for l in levels[1:]}
        for r in range(reps):
            order = levels[r % 4:] + levels[:r % 4]  # rotate so no level always runs first
            got = {}
            for level in order:
                run = self.stagescope("assets/configs/default.toml", [f"iterations={iters}"], level)
                got[level] = self.step_time(run["times"])
                times[level].append(got[level])
                sizes[level].append(run["bytes"])
                if level == "stats" and r == 0:
                    _, _, _, rows = self.analyse(run["file"], 0)
                    self.runfile_stats = {"bytes": run["bytes"], "rows": rows, "iterations": iters,
                                          "bytes_per_row": run["bytes"] / rows}
                self.drop(run)
            for l in levels[1:]:
                ratios[l].append(got[l] / got["off"])
            log(f"part 2 rep {r}: " + "  ".join(f"{l} {got[l]*1e3:.1f} ms" for l in levels) +
                f"  (load {load()})")
        self.results["parts"]["recording_cost"] = {
            "config": "assets/configs/default.toml", "iterations": iters, "reps": reps,
            "step_s": times, "file_bytes": sizes, "ratios": ratios,
            "ratio_median": {l: median(v) for l, v in ratios.items()}, "target_stats": 1.05,
            "load": load()}

    # -- part 10: in-band verification -----------------------------------------------------------
    def part_verification(self):
        """Step time at level stats (every receiver verifies the sender's checksum and the
        plan's shape before using a payload) / level off (no checksum travels), same config
        otherwise; off and stats alternate in each repetition (who runs first alternates too),
        so both see the same machine load.  Target <= 1.03 (engine-trust issue)."""
        a = self.a
        iters = 3 if a.smoke else 20
        reps = 1 if a.smoke else 7
        times = {"off": [], "stats": []}
        ratios = []
        for r in range(reps):
            got = {}
            for level in (("off", "stats") if r % 2 == 0 else ("stats", "off")):
                run = self.stagescope("assets/configs/default.toml", [f"iterations={iters}"], level)
                got[level] = self.step_time(run["times"])
                times[level].append(got[level])
                self.drop(run)
            ratios.append(got["stats"] / got["off"])
            log(f"part 10 rep {r}: off {got['off']*1e3:.1f} ms  stats {got['stats']*1e3:.1f} ms  "
                f"ratio {ratios[-1]:.3f}  (load {load()})")
        self.results["parts"]["verification"] = {
            "config": "assets/configs/default.toml", "iterations": iters, "reps": reps,
            "step_s": times, "ratios": ratios, "ratio_median": median(ratios), "target": 1.03,
            "load": load()}

    # -- part 3: writer throughput ---------------------------------------------------------------
    def part_writer(self):
        exe = os.path.join(self.a.build, "tests", "storage", "bench_writer")
        if not os.path.exists(exe):
            self.results["skipped"]["writer"] = f"{exe} not built"
            log(f"SKIP part 3: {exe} not built")
            return
        rows = 20000 if self.a.smoke else 2000000
        reps = 1 if self.a.smoke else 5
        p = subprocess.run([exe, str(rows), self.tmp, str(reps)], capture_output=True, text=True,
                           timeout=900)
        if p.returncode != 0:
            raise RuntimeError(f"bench_writer failed:\n{p.stdout}\n{p.stderr}")
        t = p.stdout
        num = lambda pat: float(re.search(pat, t).group(1))
        # bench_writer: plain = one-row INSERT loop (the target's reference), plain16 = the
        # writer's own 16-row INSERTs in a loop; ratios are medians of per-repetition ratios.
        res = {"rows": rows, "reps": reps, "output": t.strip().splitlines(),
               "plain_rows_per_s": num(r"plain prepared INSERT loop.*?= ([\d.]+) M rows/s") * 1e6,
               "plain16_rows_per_s": num(r"plain loop, 16 rows/INSERT.*?= ([\d.]+) M rows/s") * 1e6,
               "writer_rows_per_s": num(r"ShardWriter.*?= ([\d.]+) M rows/s") * 1e6,
               "writer_to_plain": num(r"ratio to plain ([\d.]+)"),
               "writer_to_plain_reps": [float(x) for x in
                                        re.search(r"ratio to plain [\d.]+ \(median of reps ([\d., ]+)\)", t)
                                        .group(1).split(", ")],
               "writer_to_plain_cpu": num(r"\); CPU ratio ([\d.]+)"),
               "writer_to_plain16": num(r"ratio to plain16 ([\d.]+)"),
               "writer_to_plain16_cpu": num(r"CPU ratio to plain16 ([\d.]+)"),
               "merge_8_shards_s": num(r"merge 8 shards.*?: ([\d.]+) s"),
               "target_rows_per_s": 1e6, "target_ratio": 0.9, "load": load()}
        self.results["parts"]["writer"] = res
        log(f"part 3: writer {res['writer_rows_per_s']/1e6:.2f} M rows/s, plain {res['plain_rows_per_s']/1e6:.2f} M rows/s, "
            f"ratio {res['writer_to_plain']:.2f} (CPU {res['writer_to_plain_cpu']:.2f}; to the 16-row loop "
            f"{res['writer_to_plain16']:.2f}), merge {res['merge_8_shards_s']:.2f} s")

    # -- part 4 (+6): pipeline efficiency and scaling -------------------------------------------
    def analyse(self, path, pp):
        """Bubble fraction per rank and peak stored activations per stage from the actions."""
        con = sqlite3.connect(path)
        rows = con.execute("SELECT rank, iteration, seq, kind, start_ns, end_ns FROM actions "
                           "ORDER BY iteration, rank, seq").fetchall()
        stage_of = dict(con.execute("SELECT rank, pp FROM ranks").fetchall()) if \
            "pp" in [c[1] for c in con.execute("PRAGMA table_info(ranks)")] else {}
        counts = {}
        for (n,) in [con.execute(f"SELECT COUNT(*) FROM {t}").fetchone() for t in
                     ("actions", "transfers", "gradients", "losses", "inputs", "plan", "diagnoses")]:
            counts.setdefault("rows", 0)
            counts["rows"] += n
        con.close()
        by_it = {}
        self.comm_share = {}
        for rank, it, seq, kind, s, e in rows:
            by_it.setdefault(it, {}).setdefault(rank, []).append((seq, kind, s, e))
        iters = sorted(by_it)
        use = iters[1:] if len(iters) > 1 else iters  # iteration 0 is warm-up
        bubbles = {}
        peaks = {}
        for it in iters:
            ranks = by_it[it]
            comp = [(s, e) for acts in ranks.values() for _, k, s, e in acts if k in ("F", "B")]
            t0, t1 = min(s for s, _ in comp), max(e for _, e in comp)
            for rank, acts in ranks.items():
                live = peak = 0
                for _, k, _, _ in sorted(acts):
                    live += (k == "F") - (k == "B")
                    peak = max(peak, live)
                peaks[rank] = max(peaks.get(rank, 0), peak)
                if it in use:
                    busy = sum(e - s for _, k, s, e in acts if k in ("F", "B"))
                    comm = sum(e - s for _, k, s, e in acts if k not in ("F", "B", "DP_REDUCE", "OPT_STEP"))
                    bubbles.setdefault(rank, []).append(1 - busy / (t1 - t0))
                    self.comm_share.setdefault(rank, []).append(comm / (t1 - t0))
        return ({r: statistics.mean(v) for r, v in sorted(bubbles.items())},
                dict(sorted(peaks.items())), stage_of, counts["rows"])

    def part_pipeline(self):
        a = self.a
        pps = [2, 4] if a.smoke else [2, 4, 8]
        ms = [4] if a.smoke else [4, 8, 16, 32]
        iters = 2 if a.smoke else 4
        grid = []
        for pp in pps:
            for m in ms:
                run = self.stagescope("assets/configs/llm_pp4.toml",
                                      [f"iterations={iters}", f"microbatches={m}", f"modules.llm.pp={pp}"] +
                                      [f"modules.llm.{k}={v}" for k, v in PIPE_MODEL.items()], "stats")
                bubbles, peaks, _, rows = self.analyse(run["file"], pp)
                comm = [statistics.mean(v) for _, v in sorted(self.comm_share.items())]
                theory = (pp - 1) / (m + pp - 1)
                cell = {"pp": pp, "m": m, "bubble_per_rank": list(bubbles.values()),
                        "bubble_mean": statistics.mean(bubbles.values()), "bubble_theory": theory,
                        "comm_share_per_rank": comm, "comm_share_mean": statistics.mean(comm),
                        "peak_activations": [peaks[s] for s in range(pp)],
                        "peak_expected": [min(pp - s, m) for s in range(pp)],
                        "step_s": self.step_time(run["times"]) if len(run["times"]) > 1 else run["times"][0],
                        "file_bytes": run["bytes"], "rows": rows,
                        "bytes_per_row": run["bytes"] / max(rows, 1)}
                cell["peaks_match"] = cell["peak_activations"] == cell["peak_expected"]
                grid.append(cell)
                self.drop(run)
                log(f"part 4 pp={pp} m={m}: bubble mean {cell['bubble_mean']:.3f} (theory {theory:.3f}) "
                    f"per rank {[round(b, 3) for b in cell['bubble_per_rank']]}; peak act {cell['peak_activations']} "
                    f"(expected {cell['peak_expected']}); step {cell['step_s']*1e3:.1f} ms, {run['bytes']} B")
        self.results["parts"]["pipeline"] = {"iterations": iters, "record": "stats", "model": PIPE_MODEL,
                                             "grid": grid, "load": load()}

    def part_scaling(self):
        a = self.a
        hiddens = [] if a.smoke else [32, 128, 512]  # smoke: part 4's runs stand in
        rows = []
        for h in hiddens:
            run = self.stagescope("assets/configs/llm_pp4.toml",
                                  [f"iterations={2 if a.smoke else 6}", f"modules.llm.hidden={h}",
                                   f"modules.llm.ffn={4 * h}"], "stats")
            rows.append({"hidden": h, "step_s": self.step_time(run["times"]), "file_bytes": run["bytes"]})
            self.drop(run)
            log(f"part 6 hidden={h}: step {rows[-1]['step_s']*1e3:.1f} ms, {run['bytes']} B")
        grid = self.results["parts"].get("pipeline", {}).get("grid", [])
        self.results["parts"]["scaling"] = {
            "hidden": rows,
            "microbatches_pp4": [{"m": c["m"], "step_s": c["step_s"], "file_bytes": c["file_bytes"]}
                                 for c in grid if c["pp"] == 4],
            "world_size_m8": [{"world": c["pp"], "step_s": c["step_s"], "file_bytes": c["file_bytes"]}
                              for c in grid if c["m"] == 8],
            "load": load()}

    # -- part 5: viewer and reports at scale -----------------------------------------------------
    def part_scale(self):
        a = self.a
        res = {}
        gui = os.path.join(a.build, "tests", "ui", "bench_gui")
        if os.path.exists(gui):
            res["gui"] = []
            for n in ([20000] if a.smoke else [100000, 1000000]):
                p = subprocess.run([gui, str(n)], capture_output=True, text=True, timeout=600)
                if p.returncode != 0:
                    raise RuntimeError(f"bench_gui failed:\n{p.stdout}\n{p.stderr}")
                t = p.stdout
                g = lambda pat: float(re.search(pat, t).group(1))
                ev = int(re.search(r"synthetic run: (\d+) events", t).group(1))
                db = re.search(r"wrote (\S+) in", t)
                size = os.path.getsize(db.group(1)) if db and os.path.exists(db.group(1)) else None
                res["gui"].append({"events": ev, "load_s": g(r"load: ([\d.]+) s"),
                                   "frame_zoomed_out_ms": g(r"frame, zoomed out: median ([\d.]+) ms"),
                                   "frame_zoomed_out_p99_ms": g(r"frame, zoomed out: median [\d.]+ ms\s+p99 ([\d.]+)"),
                                   "frame_zoomed_in_ms": g(r"frame, zoomed in.*?median ([\d.]+) ms"),
                                   "frame_playing_ms": g(r"frame, playing \(zoomed out.*?median ([\d.]+) ms"),
                                   "file_bytes": size, "bytes_per_event": size / ev if size else None,
                                   "output": t.strip().splitlines()})
                log(f"part 5 bench_gui {ev} events: load {res['gui'][-1]['load_s']:.2f} s, frame zoomed out "
                    f"{res['gui'][-1]['frame_zoomed_out_ms']:.2f} ms, {size} B")
        else:
            self.results["skipped"]["gui"] = f"{gui} not built (STAGESCOPE_WITH_UI off)"
            log(f"SKIP part 5 bench_gui: not built")
        cmp_exe = os.path.join(a.build, "tests", "report", "bench_compare")
        if os.path.exists(cmp_exe):
            n = 20000 if a.smoke else 1000000
            p = subprocess.run([cmp_exe, str(n), self.tmp], capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"bench_compare failed:\n{p.stdout}\n{p.stderr}")
            t = p.stdout
            g = lambda pat: float(re.search(pat, t).group(1))
            res["compare"] = {"events_per_run": int(re.search(r"x (\d+) events", t).group(1)),
                              "compare_s": g(r"compare: ([\d.]+)s"), "check_s": g(r"check: ([\d.]+)s"),
                              "export_s": g(r"export: ([\d.]+)s"), "output": t.strip().splitlines()}
            log(f"part 5 bench_compare: compare {res['compare']['compare_s']:.3f} s, export {res['compare']['export_s']:.3f} s")
        else:
            self.results["skipped"]["compare"] = f"{cmp_exe} not built"
        # Run-file size per row for a real run (default config, default level; from part 2).
        if getattr(self, "runfile_stats", None) is None:
            run = self.stagescope("assets/configs/default.toml", ["iterations=4"], "stats")
            _, _, _, rows = self.analyse(run["file"], 0)
            self.runfile_stats = {"bytes": run["bytes"], "rows": rows, "iterations": 4,
                                  "bytes_per_row": run["bytes"] / rows}
            self.drop(run)
        res["runfile_default_stats"] = self.runfile_stats
        res["load"] = load()
        self.results["parts"]["scale"] = res

    # -- part 7: the real viewer and CLI paths at 10^6 and 10^7 events -------------------------
    # `stagescope gui FILE` under Xvfb with STAGESCOPE_GUI_TIMING (timestamps from the process:
    # first useful frame, fully loaded, frame times zoomed out / in, peak RSS), once with the
    # machine otherwise as it is ("idle") and once next to a 4-rank run ("busy"); then check,
    # compare (the file against a copy of itself) and export through the CLI, each under
    # /usr/bin/time for its peak RSS.  Files go under BUILD/bench-scale and are deleted after.
    def gui_timing(self, path, busy):
        log_path = os.path.join(self.scale_dir, "gui-timing.log")
        env = dict(os.environ, STAGESCOPE_GUI_TIMING=log_path)
        exe = os.path.join(self.a.build, "app", "stagescope")
        frames = "frames 10" if self.a.smoke else "frames 150"
        cmd = ["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", exe, "gui", path,
               "--script", "zoom-fit", "--script", frames, "--script", "zoom 500 520",
               "--script", frames, "--script", "quit"]
        load_bg = None
        if busy:  # a concurrent 4-rank run, restarted until the viewer is done
            load_bg = subprocess.Popen(
                ["bash", "-c", f"while true; do '{exe}' run {ROOT}/assets/configs/llm_pp4.toml --record off "
                 f"--set iterations=200 --out '{self.scale_dir}/busy.db' >/dev/null 2>&1; "
                 f"rm -f '{self.scale_dir}'/busy.db*; done"], start_new_session=True)
            time.sleep(3)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        finally:
            if load_bg:
                os.killpg(load_bg.pid, 15)
                load_bg.wait()
                subprocess.run(["bash", "-c", f"rm -f '{self.scale_dir}'/busy.db*"])
        if p.returncode != 0:
            raise RuntimeError(f"stagescope gui failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        phases, frames, mem = {}, {"out": [], "in": [], "loading": []}, None
        for line in open(log_path):
            f = line.split()
            if f[1] == "phase":
                phases[f[2]] = float(f[0]) / 1e3
            elif f[1] == "frame":
                frames.setdefault(f[4], []).append((float(f[2]), float(f[3])))
            elif f[1] == "memory":
                mem = float(f[3])
        def stats(v, k):
            xs = sorted(x[k] for x in v)
            return {"median": xs[len(xs) // 2], "p99": xs[min(len(xs) - 1, len(xs) * 99 // 100)]} if xs else None
        return {"load_at_start": load(), "phases_s": phases, "peak_rss_mb": mem,
                "frame_cpu_ms": {k: stats(v, 0) for k, v in frames.items()},
                "frame_wall_ms": {k: stats(v, 1) for k, v in frames.items()}}

    def cli_timed(self, args):
        exe = os.path.join(self.a.build, "app", "stagescope")
        t = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb %M", exe] + args, capture_output=True,
                           text=True, timeout=900)
        wall = time.perf_counter() - t
        m = re.search(r"maxrss_kb (\d+)", p.stderr)
        return {"seconds": wall, "exit": p.returncode, "peak_rss_mb": int(m.group(1)) / 1024 if m else None}

    def part_realpath(self):
        a = self.a
        gui = os.path.join(a.build, "tests", "ui", "bench_gui")
        if not os.path.exists(gui) or not shutil.which("xvfb-run"):
            self.results["skipped"]["realpath"] = "bench_gui not built or xvfb-run missing"
            log("SKIP part 7: bench_gui not built or xvfb-run missing")
            return
        self.scale_dir = os.path.join(a.build, "bench-scale")
        os.makedirs(self.scale_dir, exist_ok=True)
        res = {"runs": []}
        sizes = [20000] if a.smoke else [int(x) for x in a.scale_events.split(",")]
        # --scale-files: existing run files measured as they are (never written or removed here).
        given = [f for f in a.scale_files.split(",") if f] if a.scale_files and not a.smoke else []
        prev = {x["events"] // 1000: x for x in self.previous.get("realpath", {}).get("runs", [])}
        for n in (given or sizes):
            own = not given
            path = os.path.join(self.scale_dir, f"run{n}.db") if own else n
            copy = os.path.join(self.scale_dir, f"copy{n}.db" if own else "copy-given.db")
            for f in ((path, copy) if own else (copy,)):
                if os.path.exists(f):
                    os.remove(f)
            try:
                t = time.perf_counter()
                if own:
                    p = subprocess.run([gui, str(n), "--write", path], capture_output=True, text=True, timeout=3600)
                    if p.returncode != 0:
                        raise RuntimeError(f"bench_gui --write failed:\n{p.stdout}\n{p.stderr}")
                    ev = int(re.search(r"synthetic run: (\d+) events", p.stdout).group(1))
                else:
                    import sqlite3  # events as countEvents counts them: actions, transfers, gradients, losses
                    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                        ev = sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                                 for t in ("actions", "transfers", "gradients", "losses"))
                r = {"events": ev, "file_bytes": os.path.getsize(path),
                     "measured": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                     "write_s": time.perf_counter() - t if own else None, "file": None if own else path}
                r["gui_idle"] = self.gui_timing(path, busy=False)
                if not a.smoke:  # the smoke run checks the outputs parse; keep it short
                    r["gui_busy"] = self.gui_timing(path, busy=True)
                r["read_floor"] = self.read_floor(path)
                if a.scale_skip_cli:  # keep the CLI figures of an earlier run of this size, marked so
                    old = prev.get(ev // 1000, {})
                    if all(k in old for k in ("check", "compare", "export")):
                        r.update({k: old[k] for k in ("check", "compare", "export")}, cli_earlier=True)
                else:
                    shutil.copy(path, copy)
                    r["check"] = self.cli_timed(["check", path])
                    r["compare"] = self.cli_timed(["compare", path, copy])
                    r["export"] = self.cli_timed(["export", path, "--chrome-trace",
                                                  os.path.join(self.scale_dir, "trace.json")])
                res["runs"].append(r)
                self.results["parts"]["realpath"] = res
                self.write()  # each size as soon as it is measured (a 10^7 run takes long)
                log(f"part 7 {ev} events: first useful frame {r['gui_idle']['phases_s'].get('first-useful-frame')} s, "
                    f"loaded {r['gui_idle']['phases_s'].get('loaded')} s" +
                    (f", check {r['check']['seconds']:.1f} s" if "check" in r else ""))
            finally:
                for f in ((path,) if own else ()) + (copy, os.path.join(self.scale_dir, "trace.json")):
                    if os.path.exists(f):
                        os.remove(f)
        # Sizes not measured this time keep their earlier results.
        done = {x["events"] // 1000 for x in res["runs"]}
        res["runs"] += [x for k, x in prev.items() if k not in done and not a.smoke]
        res["runs"].sort(key=lambda x: x["events"])
        res["load"] = load()
        self.results["parts"]["realpath"] = res

    def read_floor(self, path):
        """SQLite's own cost of decoding the file's timeline tables (tests/bench/bench_read_floor):
        CPU seconds of one thread stepping every row and taking every column, nothing else."""
        exe = os.path.join(self.a.build, "tests", "bench", "bench_read_floor")
        if not os.path.exists(exe):
            return None
        p = subprocess.run([exe, path], capture_output=True, text=True, timeout=3600)
        m = re.search(r"^\| all \| (\d+) \| ([\d.]+) \|", p.stdout, re.M)
        if p.returncode != 0 or not m:
            raise RuntimeError(f"bench_read_floor failed:\n{p.stdout}\n{p.stderr}")
        tables = {t: float(c) for t, c in re.findall(r"^\| (\w+_rows) \| \d+ \| ([\d.]+) \|", p.stdout, re.M)}
        return {"rows": int(m.group(1)), "cpu_s": float(m.group(2)), "tables_cpu_s": tables, "load": load()}

    # -- part 11: check / compare / export / merge on real engine runs -------------------------
    # Two runs of the engine (llm pp4, a tiny model, 32 microbatches, record stats, same seed):
    # ~5,400 events per iteration, so 186 iterations make ~10^6 events and 1,860 ~10^7.  Files
    # given with --real-runs A,B (made earlier: a 10^7 run takes ~20 minutes on 2 busy cores)
    # are used as they are and never deleted; otherwise the part runs the engine itself for each
    # size in --real-iterations and deletes what it made.  Each command runs under /usr/bin/time
    # (wall, user+sys CPU, peak RSS), alternating check/compare/export, --reps times; the
    # merge is timed by re-merging a copy of run A's shards into a fresh run file.
    REAL_SETS = ["iterations={n}", "microbatches=32", "micro_batch_size=1", "modules.llm.layers=8",
                 "modules.llm.hidden=8", "modules.llm.ffn=8", "modules.llm.heads=1",
                 "modules.llm.vocab=16", "modules.llm.text_len=2", "timeout_seconds=300"]

    def timed(self, args):
        exe = os.path.join(self.a.build, "app", "stagescope")
        t = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "rusage %M %U %S", exe] + args, capture_output=True,
                           text=True, timeout=3600)
        wall = time.perf_counter() - t
        m = re.search(r"rusage (\d+) ([\d.]+) ([\d.]+)", p.stderr)
        return {"seconds": wall, "exit": p.returncode, "load": load(),
                "cpu_s": float(m.group(2)) + float(m.group(3)) if m else None,
                "peak_rss_mb": int(m.group(1)) / 1024 if m else None}

    def events_of(self, path):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        n = sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("actions_rows", "transfers_rows", "gradients_rows", "losses"))
        db.close()
        return n

    def part_tools(self):
        a = self.a
        exe = os.path.join(a.build, "app", "stagescope")
        work = os.path.join(a.build, "bench-tools")
        os.makedirs(work, exist_ok=True)
        sets = []
        if a.real_runs:
            sets.append(([os.path.abspath(x) for x in a.real_runs.split(",")], False))
        else:
            for n in ([3] if a.smoke else [int(x) for x in a.real_iterations.split(",")]):
                paths = [os.path.join(work, f"real-{n}-{s}.db") for s in "ab"]
                for f in paths:
                    subprocess.run(["bash", "-c", f"rm -f '{f}' '{f}'.rank*.shard*"])
                    cmd = [exe, "run", f"{ROOT}/assets/configs/llm_pp4.toml", "-q", "-o", f]
                    for x in self.REAL_SETS:
                        cmd += ["--set", x.format(n=n)]
                    p = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
                    if p.returncode != 0:
                        raise RuntimeError(f"engine run failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
                sets.append((paths, True))
        res = {"runs": [], "model": "llm_pp4.toml, " + ", ".join(x.format(n="N") for x in self.REAL_SETS)}
        for (pa, pb), made in sets:
            r = {"events": self.events_of(pa), "file_bytes": os.path.getsize(pa), "check": [], "compare": [],
                 "export": []}
            trace = os.path.join(work, "trace.json")
            for rep in range(1 if a.smoke else a.reps):
                r["check"].append(self.timed(["check", pa]))
                r["compare"].append(self.timed(["compare", pa, pb]))
                r["export"].append(self.timed(["export", pa, "--chrome-trace", trace]))
                log(f"part 11 {r['events']:,} events rep {rep}: " + ", ".join(
                    f"{k} {r[k][-1]['seconds']:.1f} s ({r[k][-1]['cpu_s']:.1f} s CPU, {r[k][-1]['peak_rss_mb']:.0f} MB)"
                    for k in ("check", "compare", "export")) + f" (load {load()})")
            if os.path.exists(trace):
                os.remove(trace)
            # Merge: run A's shards copied next to a fresh run file (the original stays untouched).
            shards = sorted(glob.glob(pa + ".rank*.shard"))
            if shards:
                mdir = os.path.join(work, "merge")
                shutil.rmtree(mdir, ignore_errors=True)
                os.makedirs(mdir)
                run = os.path.join(mdir, "run.db")
                for sh in shards:
                    shutil.copy(sh, os.path.join(mdir, "run.db" + sh[len(pa):]))
                src = sqlite3.connect(f"file:{pa}?mode=ro", uri=True)
                cfg = os.path.join(mdir, "config.toml")
                with open(cfg, "w") as f:
                    f.write(src.execute("SELECT config_text FROM run").fetchone()[0])
                src.close()
                r["merge"] = self.timed(["merge", run, "--config", cfg])
                r["merge"]["rows"] = self.events_of(run) if r["merge"]["exit"] == 0 else None
                shutil.rmtree(mdir, ignore_errors=True)
            res["runs"].append(r)
            self.results["parts"]["tools"] = res
            self.write()
            if made:
                for f in (pa, pb):
                    subprocess.run(["bash", "-c", f"rm -f '{f}' '{f}'.rank*.shard*"])
        res["load"] = load()
        self.results["parts"]["tools"] = res

    # -- part 8: resident memory per rank ------------------------------------------------------------
    def part_ranks(self):
        """tests/bench/rank_memory.py: Pss / private / Rss per rank at 8..128 ranks of a tiny
        model, ranks forked from the launcher (default) and exec'd (STAGESCOPE_EXEC_RANKS=1),
        the two modes one after the other at each size."""
        out = os.path.join(self.tmp, "rank_memory.json")
        cmd = [sys.executable, os.path.join(ROOT, "tests", "bench", "rank_memory.py"), "--exe", self.exe,
               "--ranks", "8" if self.a.smoke else "8,32,64,128", "--modes", "fork,exec", "--json", out]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if p.returncode != 0:
            raise RuntimeError(f"rank_memory.py failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        log(p.stdout.strip())
        with open(out) as f:
            rows = json.load(f)
        self.results["parts"]["ranks"] = {"rows": rows, "model": "llm_pp4.toml: pp 4, dp N/4, h32, L4, T8, m8",
                                          "load": load()}

    # -- part 9: multimodule layout vs PyTorch pipelining ---------------------------------------------
    def part_multimodule(self):
        """stagescope's default layout (vision tp2 dp2 -> llm tp2 pp2, 8 ranks) and the same three
        stages on three ranks, against PyTorch Schedule1F1B and ScheduleGPipe over those three
        stages (tests/bench/torch_pipeline_multimodule.py: what the peer can express)."""
        a = self.a
        if not a.peer_python:
            self.results["skipped"]["multimodule"] = a.peer_reason or "PyTorch peer unavailable"
            log(f"SKIP part 9: {self.results['skipped']['multimodule']}")
            return
        iters = 3 if a.smoke else 20
        reps = 1 if a.smoke else 3
        three = ["modules.vision.tp=1", "modules.vision.dp=1", "modules.llm.tp=1", "modules.llm.offset=1"]
        systems = {"ss8": ("stagescope default layout, 8 ranks", []),
                   "ss3": ("stagescope, the same 3 stages on 3 ranks", three),
                   "py1f1b": ("PyTorch Schedule1F1B, 3 stages on 3 ranks", "1f1b"),
                   "pygpipe": ("PyTorch ScheduleGPipe, 3 stages on 3 ranks", "gpipe")}
        names = list(systems)
        steps = {k: [] for k in names}
        loss0 = {}
        for r in range(reps):
            order = names[r % 4:] + names[:r % 4]
            for k in order:
                what = systems[k][1]
                if k.startswith("ss"):
                    run = self.stagescope("assets/configs/default.toml", [f"iterations={iters}"] + what, "off")
                    times, losses = run["times"], run["losses"]
                    self.drop(run)
                else:
                    cmd = [a.peer_python, os.path.join(ROOT, "tests", "bench", "torch_pipeline_multimodule.py"),
                           "--iterations", str(iters), "--schedule", what]
                    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                    if p.returncode != 0:
                        raise RuntimeError(f"multimodule peer failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
                    res = json.loads(p.stdout.split("RESULT ", 1)[1])
                    times, losses = res["times"], res["losses"]
                steps[k].append(self.step_time(times))
                loss0.setdefault(k, losses[0])
            log(f"part 9 rep {r}: " + "  ".join(f"{k} {steps[k][-1]*1e3:.1f} ms" for k in names) + f"  (load {load()})")
        ref = loss0["ss8"]
        rel = {k: abs(v - ref) / abs(ref) for k, v in loss0.items()}
        if max(rel.values()) >= LOSS_TOL:
            raise RuntimeError(f"part 9: iteration-0 losses differ: {loss0}")
        ratio = lambda x, y: [p / q for p, q in zip(steps[x], steps[y])]
        self.results["parts"]["multimodule"] = {
            "iterations": iters, "reps": reps, "systems": {k: v[0] for k, v in systems.items()},
            "step_s": steps, "loss_it0": loss0, "loss_rel_diff": rel,
            "ratios": {"ss8/py1f1b": ratio("ss8", "py1f1b"), "ss8/pygpipe": ratio("ss8", "pygpipe"),
                       "ss3/py1f1b": ratio("ss3", "py1f1b"), "ss3/pygpipe": ratio("ss3", "pygpipe")},
            "load": load()}

    # -- output ----------------------------------------------------------------------------------
    def write(self):
        os.makedirs(self.a.out, exist_ok=True)
        # A run of some parts only keeps the other parts' earlier results (each section runs alone).
        old = os.path.join(self.a.out, "results.json")
        if self.a.parts != "1,2,3,4,5,6,7,8,9" and not self.a.smoke and os.path.exists(old):
            with open(old) as f:
                prev = json.load(f)
            for k, v in prev.get("parts", {}).items():
                if k not in self.results["parts"] and k not in self.results["skipped"]:
                    # a kept part says when it was measured (older files: their run's date)
                    v.setdefault("measured", {"date": prev["meta"]["date"], "load_start": prev["meta"]["load_start"],
                                              "load_end": prev["meta"].get("load_end")})
                    self.results["parts"][k] = v
        with open(os.path.join(self.a.out, "results.json"), "w") as f:
            json.dump(self.results, f, indent=1)
        with open(os.path.join(self.a.out, "results.md"), "w") as f:
            f.write(markdown(self.results))


def measured(part):
    """' · measured DATE, load A→B' for a part that carries its own measurement time."""
    m = part.get("measured")
    return f" · measured {m['date']}, load {m['load_start']}→{m.get('load_end')}" if m else ""


def fmt_ms(s):
    return f"{s*1e3:.2f} ms" if s is not None else "–"


def markdown(r):
    m = r["meta"]
    P = r["parts"]
    cpus = m["cpus"]  # p ranks on fewer cores: a rank computes at most cpus/p of the time
    L = [f"# stagescope benchmarks{' (smoke run: not for quoting)' if m['smoke'] else ''}", "",
         f"{m['date']} · {m['machine']} · {m['cpus']} CPUs · load average {m['load_start']} at start, "
         f"{m.get('load_end', '–')} at end · sections {', '.join(m.get('parts_run', [])) or 'all'} took {m.get('suite_s', 0):.0f} s · "
         f"torch {m.get('torch', '–')}", "",
         ]
    # Sections kept from earlier runs carry their own date and load: list each.
    stamps = sorted({(k, v["measured"]["date"], v["measured"]["load_start"], v["measured"].get("load_end"),
                      v["measured"].get("uptime", "")) for k, v in P.items() if isinstance(v, dict) and v.get("measured")},
                    key=lambda x: x[1])
    if stamps:
        L += ["When each part was measured (load average at its start → end; `uptime` at its start):", ""]
        L += [f"- `{k}`: {d}, load {a} → {b}" + (f" (`{u}`)" if u else "") for k, d, a, b, u in stamps]
        L += [""]
    L += ["| # | Measure | Result | Target | Note |", "|---|---|---|---|---|"]
    row = lambda *c: L.append("| " + " | ".join(str(x) for x in c) + " |")
    e = P.get("engine_vs_pytorch")
    if e:
        for size, s in e["sizes"].items():
            c = s["config"]
            row("1", f"step time stagescope / PyTorch `Schedule1F1B`, {size} (h{c['hidden']}, L{c['layers']}, "
                f"T{c['text_len']}, m{c['microbatches']}, mbs{c['mbs']}, pp4)",
                f"**{s['ratio_median']:.2f}** (reps {', '.join(f'{x:.2f}' for x in s['ratios'])}; "
                f"{fmt_ms(median(s['stagescope_step_s']))} vs {fmt_ms(median(s['pytorch_step_s']))})",
                "≤ 0.50" if size == "small" else "≤ 0.85",
                f"loss rel diff {s['loss_check']['rel_diff_it0']:.1e}, weights identical "
                f"({s['loss_check']['params_compared']} params, max diff {s['loss_check']['weights_max_abs_diff']})"
                + measured(e))
            if "floor_ms" in s:
                row("1", f"{size}: machine floor Σ(F+B) ÷ min(cores, ranks); efficiency = floor ÷ step",
                    f"floor **{s['floor_ms']:.1f} ms** ({s['compute_ms_sum']:.1f} ms ÷ {s['floor_cores']}); "
                    f"efficiency **{s['efficiency']:.2f}** (step {fmt_ms(median(s['stagescope_step_s']))})",
                    "step ≤ 1.3 × floor (efficiency ≥ 0.77)", "F+B per rank from a `meta` run of the same size")
            if s.get("prepost_ratios"):
                row("1", f"{size}: step with pre-posted receives forced on (`STAGESCOPE_PREPOST=1`) / default "
                    f"(`auto`, here {s.get('prepost_default', '?')})",
                    f"**{s['prepost_ratio_median']:.2f}** (reps {', '.join(f'{x:.2f}' for x in s['prepost_ratios'])}; "
                    f"{fmt_ms(median(s.get('prepost_on_step_s', s.get('no_prepost_step_s', []))))} vs "
                    f"{fmt_ms(median(s['stagescope_step_s']))})",
                    "", "same invocation, order rotating; auto = on only while ranks ≤ cores")
    else:
        row("1", "stagescope / PyTorch pipelining", "skipped", "", r["skipped"].get("engine_vs_pytorch", ""))
    rc = P.get("recording_cost")
    if rc:
        for l in ("meta", "stats", "full"):
            row("2", f"step time at record `{l}` / `off` (default config, 8 ranks)",
                f"**{rc['ratio_median'][l]:.3f}** (reps {', '.join(f'{x:.3f}' for x in rc['ratios'][l])})",
                "≤ 1.05" if l == "stats" else "", f"off {fmt_ms(median(rc['step_s']['off']))}, "
                f"{l} {fmt_ms(median(rc['step_s'][l]))}")
    v = P.get("verification")
    if v:
        row("10", "step time at `stats` (in-band verification) / `off` (default config, 8 ranks)",
            f"**{v['ratio_median']:.3f}** (reps {', '.join(f'{x:.3f}' for x in v['ratios'])})",
            "≤ 1.03", f"off {fmt_ms(median(v['step_s']['off']))}, stats {fmt_ms(median(v['step_s']['stats']))}; "
            "alternating order")
    w = P.get("writer")
    if w:
        row("3", "ShardWriter rows/s (one writer thread)", f"**{w['writer_rows_per_s']/1e6:.2f} M/s**", "≥ 1 M/s",
            f"plain SQLite loop {w['plain_rows_per_s']/1e6:.2f} M/s")
        if "writer_to_plain_reps" in w:
            row("3", "writer ÷ plain SQLite loop (same rows; median of per-repetition ratios)",
                f"**{w['writer_to_plain']:.2f}** (reps {', '.join(f'{x:.2f}' for x in w['writer_to_plain_reps'])})",
                "≥ 0.9", f"CPU seconds ratio {w['writer_to_plain_cpu']:.2f}; against a loop of the writer's own "
                f"16-row INSERTs {w['writer_to_plain16']:.2f} (CPU {w['writer_to_plain16_cpu']:.2f})")
        row("3", "merge of 8 shards", f"{w['merge_8_shards_s']:.2f} s", "", f"{w['rows']} rows in all")
    pl = P.get("pipeline")
    if pl:
        for c in pl["grid"]:
            row("4", f"bubble fraction pp={c['pp']} m={c['m']}",
                f"{c['bubble_mean']:.3f} (ranks {', '.join(f'{b:.2f}' for b in c['bubble_per_rank'])})",
                f"theory {c['bubble_theory']:.3f}" + (f"; {cpus}-core floor ≈ {1 - cpus / c['pp']:.3f}" if c["pp"] > cpus else ""),
                f"time in comm actions {c['comm_share_mean']:.3f}; peak activations {c['peak_activations']} vs min(p−s,m) {c['peak_expected']} "
                f"{'✓' if c['peaks_match'] else '✗'}")
    sc = P.get("scale")
    if sc:
        for g in sc.get("gui", []):
            row("5", f"viewer, {g['events']:,} events: load / frame zoomed out (median, p99) / zoomed in",
                f"{g['load_s']:.2f} s / {g['frame_zoomed_out_ms']:.1f}, {g['frame_zoomed_out_p99_ms']:.1f} ms / "
                f"{g['frame_zoomed_in_ms']:.2f} ms", "< 2 s / < 10 ms",
                f"{g['bytes_per_event']:.0f} B/event" if g.get("bytes_per_event") else "")
        if "compare" in sc:
            cp = sc["compare"]
            row("5", f"compare two {cp['events_per_run']:,}-event runs", f"{cp['compare_s']:.3f} s", "< 5 s",
                f"check {cp['check_s']:.3f} s, trace export {cp['export_s']:.3f} s")
        rf = sc["runfile_default_stats"]
        row("5", "run-file size per row (default config, `stats`)", f"{rf['bytes_per_row']:.0f} B",
            "", f"{rf['bytes']} B / {rf['rows']} rows")
    rp = P.get("realpath")
    if rp:
        for x in rp["runs"]:
            ev = f"{x['events']:,}"
            for mode in ("idle", "busy"):
                g = x.get(f"gui_{mode}")
                if not g:
                    continue
                ph, fc, fw = g["phases_s"], g["frame_cpu_ms"], g["frame_wall_ms"]
                fmt = lambda d, k: f"{d[k]['median']:.1f}, {d[k]['p99']:.1f}" if d.get(k) else "–"
                when = x.get("measured", "an earlier part-7 run")
                row("7", f"`stagescope gui`, {ev} events, {mode} ({when}, load {g['load_at_start']}): first useful frame / "
                    "fully loaded / frame zoomed out, in (CPU median, p99) / peak RSS",
                    f"{ph.get('first-useful-frame', float('nan')):.2f} s / {ph.get('loaded', float('nan')):.2f} s / "
                    f"out {fmt(fc, 'out')} ms, in {fmt(fc, 'in')} ms / {g['peak_rss_mb']:.0f} MB",
                    "< 1 s / " + ("< 10 s" if x["events"] >= 5000000 else "< 2 s") + " / < 16, < 2 ms p99 / < 2 GB",
                    f"wall per frame (Xvfb software GL, swap included): out {fmt(fw, 'out')} ms, in {fmt(fw, 'in')} ms; "
                    f"window at {ph.get('window', float('nan')):.2f} s; interactive (timeline in, details loading) "
                    f"at {ph.get('interactive', float('nan')):.2f} s")
            fl = x.get("read_floor")
            if fl:
                cores = os.cpu_count() or 1
                row("7", f"SQLite's decode of the {ev}-event file alone (`bench_read_floor`: every row and column "
                    "of plan, actions, transfers, gradients; no checks, no model)",
                    f"{fl['cpu_s']:.2f} CPU-s for {fl['rows']:,} rows = **{fl['cpu_s'] / cores:.2f} s** on {cores} "
                    f"cores for one file; compare's two without their gradients (it reads only the reduced ones) "
                    f"{2 * (fl['cpu_s'] - fl['tables_cpu_s'].get('gradients_rows', 0)) / cores:.2f} s",
                    "", "the floor under the load of check, compare and the viewer on this machine; per table: " +
                    ", ".join(f"{t} {c:.2f}" for t, c in fl["tables_cpu_s"].items()) + f" CPU-s; load {fl['load']}")
            if "check" not in x:  # --scale-skip-cli: the viewer alone was measured
                continue
            row("7", f"check / compare / export, {ev}-event runs (CLI, wall, peak RSS)",
                " / ".join(f"{x[k]['seconds']:.1f} s, {x[k]['peak_rss_mb']:.0f} MB" for k in ("check", "compare", "export")),
                "< 10 s, < 2 GB each", f"{x['file_bytes'] / x['events']:.0f} B/event; exit codes "
                f"{x['check']['exit']}, {x['compare']['exit']}, {x['export']['exit']}" +
                ("; measured in an earlier run than the viewer rows" if x.get("cli_earlier") else ""))
    tl = P.get("tools")
    if tl:
        for x in tl["runs"]:
            def cell(k):
                reps = x[k] if isinstance(x[k], list) else [x[k]]
                best = min(reps, key=lambda y: y["seconds"])
                return (f"{best['seconds']:.1f} s ({best['cpu_s']:.1f} s CPU), {max(y['peak_rss_mb'] for y in reps):.0f} MB")
            def spread(k):
                return ", ".join(f"{y['seconds']:.1f}/{y['cpu_s']:.1f} s @ load {y['load']}" for y in x[k])
            row("11", f"check / compare / export, two {x['events']:,}-event engine runs (wall (CPU), peak RSS; best of "
                f"{len(x['check'])})", " / ".join(cell(k) for k in ("check", "compare", "export")),
                "< 10 s, < 2 GB each", f"{x['file_bytes'] / x['events']:.0f} B/event; exit codes "
                f"{x['check'][0]['exit']}, {x['compare'][0]['exit']}, {x['export'][0]['exit']}; reps wall/CPU: check "
                f"{spread('check')}; compare {spread('compare')}; export {spread('export')}" + measured(tl))
            if x.get("merge"):
                mg = x["merge"]
                row("11", f"merge of the {x['events']:,}-event run's 4 shards (CLI)",
                    f"{mg['seconds']:.1f} s ({mg['cpu_s']:.1f} s CPU), {mg['peak_rss_mb']:.0f} MB", "",
                    f"exit {mg['exit']}; load {mg['load']}")
    s6 = P.get("scaling")
    if s6 and s6["hidden"]:
        row("6", "step time / run file vs m (pp4, stats)",
            "; ".join(f"m{x['m']}: {fmt_ms(x['step_s'])}, {x['file_bytes']//1024} KiB" for x in s6["microbatches_pp4"]), "", "")
        row("6", "step time / run file vs hidden (pp4, m8, ffn 4h)",
            "; ".join(f"h{x['hidden']}: {fmt_ms(x['step_s'])}, {x['file_bytes']//1024} KiB" for x in s6["hidden"]), "", "")
        row("6", "step time / run file vs world size (pp, m8)",
            "; ".join(f"{x['world']} ranks: {fmt_ms(x['step_s'])}, {x['file_bytes']//1024} KiB" for x in s6["world_size_m8"]), "", "")
    rk = P.get("ranks")
    if rk:
        by = {}
        for x in rk["rows"]:
            by.setdefault(x["ranks"], {})[x.get("mode", "fork")] = x
        for n, modes in sorted(by.items()):
            f, x = modes.get("fork"), modes.get("exec")
            if f and "skipped" not in f:
                res = (f"Pss **{f['pss_mb_per_rank']:.1f} MB**/rank (private {f['private_mb_per_rank']:.1f}, "
                       f"Rss {f['rss_mb_per_rank']:.0f}); run {f['wall_s']:.0f} s")
            else:
                res = "skipped: " + (f or {}).get("skipped", "not run")
            note = ""
            if x and "skipped" not in x:
                note = (f"exec'd ranks (before): Pss {x['pss_mb_per_rank']:.1f} MB (private {x['private_mb_per_rank']:.1f}, "
                        f"Rss {x['rss_mb_per_rank']:.0f}), run {x['wall_s']:.0f} s")
                if f and "skipped" not in f:
                    note += f"; forked/exec'd Pss {f['pss_mb_per_rank'] / x['pss_mb_per_rank']:.2f}"
            elif x:
                note = "exec'd: " + x["skipped"]
            if f and f.get("estimate_mb_total"):
                note += (f"; `plan`'s estimate {f['estimate_mb_total']:.0f} MB vs measured Σ Pss "
                         f"{f['pss_mb_total']:.0f} MB (forked)")
                if x and x.get("estimate_mb_total"):
                    note += f", {x['estimate_mb_total']:.0f} vs {x['pss_mb_total']:.0f} MB (exec'd)"
            row("8", f"resident memory per rank, {n} ranks (tiny LM, pp4 × dp{n // 4})", res,
                "128 ranks run; MB/rank measured and reduced", note + measured(rk))
    mm = P.get("multimodule")
    if mm:
        st = mm["step_s"]
        for k in ("ss8", "ss3", "py1f1b", "pygpipe"):
            row("9", f"multimodule step: {mm['systems'][k]}", fmt_ms(median(st[k])),
                "", f"reps {', '.join(f'{x*1e3:.0f}' for x in st[k])} ms; loss it0 rel diff {mm['loss_rel_diff'][k]:.1e}"
                + (measured(mm) if k == "ss8" else ""))
        for k, v in mm["ratios"].items():
            row("9", f"ratio {k}", f"**{median(v):.2f}** (reps {', '.join(f'{x:.2f}' for x in v)})", "", "")
    for k, v in r["skipped"].items():
        L.append(f"\nSkipped `{k}`: {v}")
    return "\n".join(L) + "\n"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--peer-python", default="")
    p.add_argument("--peer-reason", default="")
    p.add_argument("--parts", default="1,2,3,4,5,6,7,8,9,10,11",
                   help="comma-separated sections; each runs alone, the others keep their earlier results")
    p.add_argument("--scale-events", default="1000000,10000000",
                   help="part 7: run sizes (events) to measure, comma-separated")
    p.add_argument("--scale-files", default="",
                   help="part 7: existing run files to measure instead (comma-separated; kept as they are)")
    p.add_argument("--scale-skip-cli", action="store_true",
                   help="part 7: only the viewer (no check / compare / export)")
    p.add_argument("--real-runs", default="", help="part 11: two complete run files A,B to time check/compare/"
                   "export/merge on (kept); without it part 11 runs the engine for each --real-iterations")
    p.add_argument("--real-iterations", default="186", help="part 11: iterations per run (5,400 events each)")
    p.add_argument("--reps", type=int, default=2, help="part 11: repetitions of each command")
    p.add_argument("--render-only", action="store_true", help="rewrite results.md from results.json")
    a = p.parse_args()
    if a.render_only:
        with open(os.path.join(a.out, "results.json")) as f:
            r = json.load(f)
        with open(os.path.join(a.out, "results.md"), "w") as f:
            f.write(markdown(r))
        return
    a.build = os.path.abspath(a.build)
    b = Bench(a)
    t0 = time.perf_counter()
    b.results["meta"] = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                         "machine": f"{platform.node()} ({platform.processor() or platform.machine()}, "
                                    f"{cpu_model()})", "cpus": os.cpu_count(), "smoke": a.smoke,
                         "load_start": load()}
    if a.peer_python:
        v = subprocess.run([a.peer_python, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True)
        b.results["meta"]["torch"] = v.stdout.strip()
    parts = set(a.parts.split(","))
    try:
        for key, fn in (("1", b.part_torch), ("2", b.part_recording), ("3", b.part_writer),
                        ("4", b.part_pipeline), ("6", b.part_scaling), ("5", b.part_scale),
                        ("7", b.part_realpath), ("8", b.part_ranks), ("9", b.part_multimodule),
                        ("10", b.part_verification), ("11", b.part_tools)):
            if key in parts:
                t = time.perf_counter()
                before = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "load_start": load(),
                          "uptime": uptime()}
                fn()
                b.results["meta"].setdefault("part_seconds", {})[key] = round(time.perf_counter() - t, 1)
                for name in PART_KEYS[key]:
                    if name in b.results["parts"]:
                        b.results["parts"][name]["measured"] = dict(before, load_end=load())
    finally:
        b.results["meta"].update(load_end=load(), suite_s=time.perf_counter() - t0, parts_run=sorted(parts))
        b.write()
        shutil.rmtree(b.tmp, ignore_errors=True)
    log(f"wrote {os.path.join(a.out, 'results.md')} and results.json in {time.perf_counter() - t0:.0f} s")


# Section number -> the result parts it writes.
PART_KEYS = {"1": ["engine_vs_pytorch"], "2": ["recording_cost"], "3": ["writer"], "4": ["pipeline"],
             "5": ["scale"], "6": ["scaling"], "7": ["realpath"], "8": ["ranks"], "9": ["multimodule"],
             "10": ["verification"], "11": ["tools"]}


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    main()
