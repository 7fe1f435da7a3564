#!/usr/bin/env python3
"""Overhead of the capture backend: step time of a 4-rank torch.distributed.pipelining job
(Schedule1F1B, Gloo, CPU) through `stagescope` at off (forwarding only) / meta / stats / full,
divided by the same job on plain Gloo.  Not part of the test suite (no timing assertions
anywhere).  `scripts/bench.sh --capture` runs it alone.

  bench_capture.py --build build/default [--reps 3] [--steps 12] [--sizes small,medium] [--out DIR]

Each repetition runs every variant once, in rotating order; a variant's step time is the
median over its repetitions of the median step (steps after the first two).  Ratios are
taken within this one invocation.  Also reported: rows recorded per second of step time, and
the job's CPU seconds per step (each rank's median process CPU time in a step, all its
threads, summed over the 4 ranks): on a loaded machine wall times are mostly waiting for a
core, so the CPU ratio is the robust measure of what the backend costs.
Writes DIR/capture_overhead.json and .md (default BUILD/bench-capture).
"""

import argparse
import glob
import json
import os
import sqlite3
import statistics
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_util import job_env, torchrun  # noqa: E402

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipelining_job.py")
# stats-inline: level stats with the digests on the job's thread (STAGESCOPE_DIGEST_INLINE=1),
# the alternative to the DigestWorker, measured in the same invocation.
VARIANTS = [("gloo", None), ("stagescope", "off"), ("stagescope", "meta"), ("stagescope", "stats"),
            ("stagescope", "stats-inline"), ("stagescope", "full")]
SIZES = {  # name -> job arguments
    "small": ["--hidden", "64", "--batch", "32", "--depth", "2", "--microbatches", "8"],
    "medium": ["--hidden", "512", "--batch", "64", "--depth", "4", "--microbatches", "8"],
}
TABLES = ["transfers", "actions", "collectives", "gradients", "diagnoses"]


def run_variant(tmp, tag, backend, level, size_args, steps):
    out = os.path.join(tmp, f"{tag}-out")
    run = os.path.join(tmp, f"{tag}.db") if level else None
    args = ["--backend", backend, "--out", out, "--steps", str(steps), "--times"] + size_args
    env = job_env(run, (level or "stats").replace("-inline", ""))
    env.pop("STAGESCOPE_DIGEST_INLINE", None)
    if level and level.endswith("-inline"):
        env["STAGESCOPE_DIGEST_INLINE"] = "1"
    r = torchrun(JOB, 4, args, env)
    if r.returncode != 0:
        raise SystemExit(f"bench: {tag} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    times = torch.load(os.path.join(out, "rank0.pt"), weights_only=False)["times"][2:]
    # CPU seconds per step of the whole job: each rank's median over its steps (after the first
    # two) of its process's CPU time in the step (all threads), summed over the ranks.
    cpu = 0.0
    for r in range(4):
        cpu += statistics.median(torch.load(os.path.join(out, f"rank{r}.pt"),
                                            weights_only=False)["cpu"][2:])
    rows = 0
    if run:
        for shard in glob.glob(run + ".rank*.shard"):
            con = sqlite3.connect(shard)
            rows += sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES)
            con.close()
    return statistics.median(times), sum(times), rows, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/default")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--sizes", default="small,medium")
    ap.add_argument("--out")
    a = ap.parse_args()
    os.environ.setdefault("STAGESCOPE_PYTHON_DIR", os.path.join(os.path.abspath(a.build), "python"))
    out_dir = a.out or os.path.join(a.build, "bench-capture")
    os.makedirs(out_dir, exist_ok=True)
    results = {"load_before": os.getloadavg()[0], "sizes": {}}
    for size in a.sizes.split(","):
        per = {f"{b}:{l or 'plain'}": [] for b, l in VARIANTS}
        cpu = {k: [] for k in per}  # CPU seconds per step of the job (4 ranks together)
        ratios = {k: [] for k in per}  # per repetition: variant / plain gloo of that repetition
        loads = []
        rows_per_s = {}
        for rep in range(a.reps):
            order = VARIANTS[rep % len(VARIANTS):] + VARIANTS[:rep % len(VARIANTS)]
            for backend, level in order:
                key = f"{backend}:{level or 'plain'}"
                with tempfile.TemporaryDirectory(prefix="stagescope-bench-capture-") as tmp:
                    med, total, rows, c = run_variant(tmp, key.replace(":", "-"), backend, level,
                                                      SIZES[size], a.steps)
                per[key].append(med)
                cpu[key].append(c)
                if rows:
                    rows_per_s.setdefault(key, []).append(rows * (a.steps - 2) / a.steps / total)
                print(f"{size} rep {rep} {key}: median step {med * 1e3:.2f} ms, "
                      f"CPU {c * 1e3:.2f} ms per step (4 ranks)"
                      + (f", {rows} rows" if rows else ""), flush=True)
            loads.append(os.getloadavg()[0])
            for k in per:
                ratios[k].append(per[k][-1] / per["gloo:plain"][-1])
        base = statistics.median(per["gloo:plain"])
        cpu_base = statistics.median(cpu["gloo:plain"])
        results["sizes"][size] = {
            "args": SIZES[size],
            "step_ms": {k: statistics.median(v) * 1e3 for k, v in per.items()},
            "ratio_vs_gloo": {k: statistics.median(v) / base for k, v in per.items()},
            # the spread: per-repetition ratios (each against that repetition's plain run)
            "ratio_per_rep": ratios,
            "ratio_median_of_reps": {k: statistics.median(v) for k, v in ratios.items()},
            "load_per_rep": loads,
            "rows_per_s": {k: statistics.median(v) for k, v in rows_per_s.items()},
            # CPU seconds per step, the job's 4 processes together (robust on a loaded machine)
            "cpu_ms_per_step": {k: statistics.median(v) * 1e3 for k, v in cpu.items()},
            "cpu_per_rep": cpu,
            "cpu_ratio_vs_gloo": {k: statistics.median(v) / cpu_base for k, v in cpu.items()},
        }
    results["load_after"] = os.getloadavg()[0]
    with open(os.path.join(out_dir, "capture_overhead.json"), "w") as f:
        json.dump(results, f, indent=2)
    lines = ["| size | variant | step ms (median) | ratio vs plain gloo | per-rep ratios min..max | "
             "CPU ms per step (4 ranks) | CPU ratio vs plain gloo | rows/s of step time |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for size, r in results["sizes"].items():
        for k in r["step_ms"]:
            rows = r["rows_per_s"].get(k)
            rr = r["ratio_per_rep"][k]
            lines.append(f"| {size} | {k} | {r['step_ms'][k]:.2f} | {r['ratio_vs_gloo'][k]:.3f} | "
                         f"{min(rr):.2f}..{max(rr):.2f} | {r['cpu_ms_per_step'][k]:.2f} | "
                         f"{r['cpu_ratio_vs_gloo'][k]:.3f} | {'' if rows is None else f'{rows:,.0f}'} |")
        lines.append(f"| {size} | load average per repetition | "
                     + " ".join(f"{x:.1f}" for x in r["load_per_rep"]) + " | | | | | |")
    lines.append(f"\nload average {results['load_before']:.1f} before, {results['load_after']:.1f} after")
    with open(os.path.join(out_dir, "capture_overhead.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
