"""Helpers of the capture tests: launch a job under torchrun, run the stagescope CLI, read a
run file with Python's sqlite3, recompute XXH3-64 checksums independently of the C++ code
(tests/checksum/xxh3.py, pure Python)."""

import os
import signal
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


def stop_job(job):
    """Stops a torchrun launched in its own session (start_new_session): SIGTERM to its process
    group (the launcher kills its ranks), SIGKILL after 60 s."""
    os.killpg(job.pid, signal.SIGTERM)
    try:
        job.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


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


def read_png(path):
    """Decodes an 8-bit RGBA, non-interlaced PNG (what the viewer's screenshot writes) into a
    numpy array [height, width, 4] of uint8, with zlib and numpy only."""
    import struct
    import zlib

    import numpy as np

    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if (depth, colour, interlace) != (8, 6, 0):
                raise ValueError(f"{path}: expected 8-bit RGBA non-interlaced, got depth {depth} "
                                 f"colour type {colour} interlace {interlace}")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8)
    stride = width * 4
    raw = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prior = np.zeros(stride, dtype=np.int64)
    for y in range(height):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int64)
        if f == 0:
            cur = line
        elif f == 1:  # Sub: a running sum per channel, modulo 256
            cur = np.cumsum(line.reshape(width, 4), axis=0).reshape(-1) % 256
        elif f == 2:
            cur = (line + prior) % 256
        else:  # Average or Paeth: sequential per byte
            cur = np.zeros(stride, dtype=np.int64)
            lst, pri = line.tolist(), prior.tolist()
            c = [0] * stride
            for x in range(stride):
                a = c[x - 4] if x >= 4 else 0
                b = pri[x]
                if f == 3:
                    c[x] = (lst[x] + (a + b) // 2) % 256
                else:
                    cc = pri[x - 4] if x >= 4 else 0
                    p = a + b - cc
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - cc)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else cc)
                    c[x] = (lst[x] + pred) % 256
            cur = np.array(c, dtype=np.int64)
        out[y] = cur
        prior = cur
    return out.reshape(height, width, 4)


def read_probes(path):
    """The viewer's .probes file next to a screenshot: {kind: [list of number lists]}.

    Lines that carry text (banner-shown; clipped-text, whose window name follows its numbers)
    keep their leading numbers only."""
    probes = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            numbers = []
            for v in parts[1:]:
                try:
                    numbers.append(float(v))
                except ValueError:
                    break
            probes.setdefault(parts[0], []).append(numbers)
    return probes
