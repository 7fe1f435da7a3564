#!/usr/bin/env python3
"""The job thread's CPU time per iteration of bench_digest_job.py (2 ranks, 1 MiB float32
send + recv + all_reduce) on plain Gloo and through stagescope at meta, stats (digests on the
DigestWorker) and stats-inline (STAGESCOPE_DIGEST_INLINE=1: digests on the job's thread), in
rotating order.  Thread CPU time is what recording charges the job's thread; unlike wall time
it is barely inflated by other processes on a shared machine.  Not part of the suite.

  bench_digest.py --build build/default [--reps 3]
"""

import argparse
import os
import statistics
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_util import job_env, torchrun  # noqa: E402

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_digest_job.py")
VARIANTS = [("gloo", None, False), ("stagescope", "stats", False), ("stagescope", "stats", True),
            ("stagescope", "meta", False)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/default")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    os.environ.setdefault("STAGESCOPE_PYTHON_DIR", os.path.join(os.path.abspath(a.build), "python"))
    res = {}
    for rep in range(a.reps):
        k = rep % len(VARIANTS)
        for backend, level, inline in VARIANTS[k:] + VARIANTS[:k]:
            key = f"{backend}:{level or 'plain'}{'-inline' if inline else ''}"
            with tempfile.TemporaryDirectory(prefix="stagescope-bench-digest-") as tmp:
                env = job_env(os.path.join(tmp, "r.db") if level else None, level or "stats")
                env.pop("STAGESCOPE_DIGEST_INLINE", None)
                if inline:
                    env["STAGESCOPE_DIGEST_INLINE"] = "1"
                r = torchrun(JOB, 2, ["--backend", backend, "--out", os.path.join(tmp, "o")], env)
                if r.returncode != 0:
                    raise SystemExit(f"bench: {key} failed:\n{r.stderr[-3000:]}")
                d = [torch.load(os.path.join(tmp, "o", f"rank{i}.pt"), weights_only=False) for i in range(2)]
            cpu = statistics.median(d[0]["cpu"][5:] + d[1]["cpu"][5:]) * 1e3
            wall = statistics.median(d[0]["wall"][5:] + d[1]["wall"][5:]) * 1e3
            res.setdefault(key, []).append((cpu, wall))
            print(f"rep {rep} {key}: thread cpu {cpu:.3f} ms/iter, wall {wall:.3f} ms/iter, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    for key, v in res.items():
        c, w = [x[0] for x in v], [x[1] for x in v]
        print(f"{key}: thread cpu median {statistics.median(c):.3f} ms ({min(c):.3f}..{max(c):.3f}); "
              f"wall median {statistics.median(w):.3f} ms ({min(w):.3f}..{max(w):.3f})")


if __name__ == "__main__":
    main()
