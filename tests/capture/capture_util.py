"""Helpers of the capture tests: launch a job under torchrun, run the stagescope CLI, read a
run file with Python's sqlite3, recompute XXH3-64 checksums independently of the C++ code
(tests/checksum/xxh3.py, pure Python)."""

import os
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "checksum"))
from xxh3 import xxh3_64  # noqa: E402

MASK = (1 << 64) - 1
JOB_TIMEOUT_S = 600  # generous: the machine may be busy; a hang is reported, never waited out


def xxh3_of(data):
    """The recorded checksum function (docs/run-file.md "Checksums"): XXH3-64, seed 0."""
    return xxh3_64(data)


def unsigned(checksum):
    """The run file stores checksums as the same 64-bit pattern in a signed INTEGER."""
    return None if checksum is None else checksum & MASK


def job_env(run=None, level="stats"):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [os.environ["STAGESCOPE_PYTHON_DIR"], env.get("PYTHONPATH", "")] if p)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    env["OMP_NUM_THREADS"] = "1"
    env.pop("STAGESCOPE_RUN", None)
    env.pop("STAGESCOPE_HANG_TIMEOUT", None)
    if run is not None:
        env["STAGESCOPE_RUN"] = run
        env["STAGESCOPE_LEVEL"] = level
    return env


def torchrun_cmd(script, nproc, args):
    """The torchrun command line that runs `script` on `nproc` local ranks."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", script] + list(args)


def torchrun(script, nproc, args, env, timeout=JOB_TIMEOUT_S):
    """Runs `script` on `nproc` local ranks; returns the CompletedProcess (never raises on a
    non-zero exit; a timeout is turned into a failed result naming the job)."""
    cmd = torchrun_cmd(script, nproc, args)
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, 124, e.stdout or "",
                                           f"job did not finish within {timeout} s: {cmd}")


def stagescope(*args):
    cmd = [os.environ["STAGESCOPE_BIN"]] + [str(a) for a in args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)


def rows(run_file, sql, params=()):
    con = sqlite3.connect(f"file:{run_file}?mode=ro", uri=True)
    try:
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute(sql, params)]
    finally:
        con.close()
