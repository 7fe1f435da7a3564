#!/usr/bin/env python3
"""Per-rank resident memory of a real `stagescope run` at N ranks (issue 16, "Ranks").

  rank_memory.py --exe BUILD/app/stagescope --ranks 8,32,64,128 [--modes fork,exec] [--json OUT]

Modes: `fork` (the default launcher: CPU ranks forked from it, core/engine/PreforkedRanks.h)
and `exec` (STAGESCOPE_EXEC_RANKS=1: every rank fork+exec'd, as before), measured one after
the other at each size, the order alternating between sizes.

Each run is the tiny LM of assets/configs/llm_pp4.toml (pp 4, dp N/4, h32, L4, T8), recording
off.  While it runs, every 0.25 s the script reads /proc/PID/smaps_rollup of the launcher and
of each worker (the launcher's children) and keeps, per process, the largest value seen of

  Pss      proportional set size: private pages + each shared page / number of sharers (the
           fair share of this process in the machine's memory; sums to what the run costs);
  Private  Private_Clean + Private_Dirty (RSS minus every page another process maps too);
  Rss      resident set size (counts shared library pages in full for every rank).

"MB per rank" below is the median over workers of their peak Pss (MB = 10^6 bytes).  Also
reported: the drop of MemAvailable from before the run to its lowest point while it ran, per
rank (the machine-level view; noisy on a shared machine).  Standard library only.  Refuses to
start a run when MemAvailable is below --min-available-gb (default 12 GB for 128 ranks, scaled
linearly below that), so it never pushes a shared machine into swap or the OOM killer.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def meminfo_kb(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rollup(pid):
    """{Pss, Private, Rss} in kB of one process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            text = f.read()
    except OSError:
        return None
    v = {k: int(n) for k, n in re.findall(r"^(\w+):\s+(\d+) kB", text, re.M)}
    return {"Pss": v.get("Pss", 0), "Private": v.get("Private_Clean", 0) + v.get("Private_Dirty", 0),
            "Rss": v.get("Rss", 0)}


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def measure(exe, ranks, iterations, extra_sets, timeout, mode="fork"):
    assert ranks % 4 == 0, "ranks must be a multiple of 4 (pp 4 x dp N/4)"
    tmp = tempfile.mkdtemp(prefix="stagescope-rankmem-")
    out = os.path.join(tmp, f"r{ranks}.db")
    cmd = [exe, "run", os.path.join(ROOT, "assets/configs/llm_pp4.toml"), "-o", out, "--record", "off",
           "--set", f"iterations={iterations}", "--set", "modules.llm.pp=4",
           "--set", f"modules.llm.dp={ranks // 4}", "--set", "timeout_seconds=300"]
    for s in extra_sets:
        cmd += ["--set", s]
    avail0 = meminfo_kb("MemAvailable")
    low = avail0
    peak = {}  # pid -> {Pss, Private, Rss} maxima
    t0 = time.perf_counter()
    env = dict(os.environ)
    env.pop("STAGESCOPE_EXEC_RANKS", None)
    if mode == "exec":
        env["STAGESCOPE_EXEC_RANKS"] = "1"
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    workers = set()
    try:
        while p.poll() is None:
            if time.perf_counter() - t0 > timeout:
                p.terminate()
                raise RuntimeError(f"{ranks} ranks: no exit after {timeout} s")
            kids = children(p.pid)
            workers.update(kids)
            for pid in [p.pid] + kids:
                r = rollup(pid)
                if r:
                    m = peak.setdefault(pid, dict(r))
                    for k in r:
                        m[k] = max(m[k], r[k])
            low = min(low, meminfo_kb("MemAvailable"))
            time.sleep(0.25)
        stdout, stderr = p.communicate()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    wall = time.perf_counter() - t0
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {stderr[-2000:]}")
    # The estimate `plan` prints for the same run (core/plan/MemoryEstimate.h), to set beside
    # what was measured.
    plan_env = dict(env)
    est = None
    pp = subprocess.run([exe, "plan"] + cmd[2:3] + [x for x in cmd[5:] if x not in ("--record", "off")],
                        capture_output=True, text=True, env=plan_env)
    m = re.search(r"memory estimate: ([\d.]+) (\w+) in total", pp.stdout)
    if m:
        est = float(m.group(1)) * {"B": 1e-6, "kB": 1e-3, "MB": 1, "GB": 1e3, "TB": 1e6}[m.group(2)]
    w = [peak[pid] for pid in workers if pid in peak]
    if len(w) < ranks:
        raise RuntimeError(f"{ranks} ranks: sampled only {len(w)} workers")
    med = lambda k: statistics.median(x[k] for x in w) / 1000.0  # kB -> MB
    return {"ranks": ranks, "mode": mode, "wall_s": round(wall, 1),
            "pss_mb_per_rank": round(med("Pss"), 1), "private_mb_per_rank": round(med("Private"), 1),
            "rss_mb_per_rank": round(med("Rss"), 1),
            "pss_mb_sum_workers": round(sum(x["Pss"] for x in w) / 1000.0, 0),
            "launcher_pss_mb": round(peak.get(p.pid, {}).get("Pss", 0) / 1000.0, 1),
            "pss_mb_total": round((sum(x["Pss"] for x in w) + peak.get(p.pid, {}).get("Pss", 0)) / 1000.0, 0),
            "estimate_mb_total": est,
            "memavailable_drop_mb": round((avail0 - low) / 1000.0, 0),
            "memavailable_drop_mb_per_rank": round((avail0 - low) / 1000.0 / ranks, 1),
            "memavailable_before_mb": round(avail0 / 1000.0, 0),
            "load": round(os.getloadavg()[0], 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--ranks", default="8,32,64,128")
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--modes", default="fork", help="fork, exec or both (fork,exec)")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--min-available-gb", type=float, default=12.0, help="needed for 128 ranks")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rows = []
    modes = a.modes.split(",")
    for i, n in enumerate(int(x) for x in a.ranks.split(",")):
        for mode in (modes if i % 2 == 0 else modes[::-1]):
            need = a.min_available_gb * n / 128
            have = meminfo_kb("MemAvailable") / 1e6
            if have < need:
                rows.append({"ranks": n, "mode": mode, "skipped": f"MemAvailable {have:.1f} GB < {need:.1f} GB needed"})
                print(f"rank memory: SKIP {n} ranks ({mode}): {rows[-1]['skipped']}", flush=True)
                continue
            r = measure(a.exe, n, a.iterations, a.sets, a.timeout, mode)
            rows.append(r)
            print(f"rank memory: {n} ranks ({mode}): Pss {r['pss_mb_per_rank']} MB/rank, private {r['private_mb_per_rank']} MB, "
                  f"Rss {r['rss_mb_per_rank']} MB; MemAvailable drop {r['memavailable_drop_mb']} MB "
                  f"({r['memavailable_drop_mb_per_rank']} MB/rank); {r['wall_s']} s; load {r['load']}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
