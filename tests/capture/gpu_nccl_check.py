#!/usr/bin/env python3
"""GPU check of the capture backend with NCCL inside (not part of the suite: no GPU in CI).

One rank (NCCL refuses two ranks on one GPU): an all_reduce and a broadcast of CUDA tensors
through `stagescope` with STAGESCOPE_INNER=nccl, then the recorded rows are compared with
the values computed here.  Run on a GPU machine from the repository root:

    STAGESCOPE_PYTHON_DIR=build/cuda/python build/cuda/app/stagescope --version
    PYTHONPATH=build/cuda/python .venv/bin/python tests/capture/gpu_nccl_check.py RUN.db

Exit 0 when the run file holds both collectives, completed, with the output checksum of
the all_reduce equal to XXH3-64 of the result's bytes.
"""
import os
import sqlite3
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "checksum"))
from xxh3 import xxh3_64  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():
    run = sys.argv[1]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    import stagescope_torch
    stagescope_torch.configure(run=run, level="stats", inner="nccl")
    dist.init_process_group("stagescope", rank=0, world_size=1)
    x = torch.arange(16, dtype=torch.float32, device="cuda")
    dist.all_reduce(x)
    dist.broadcast(x, 0)
    torch.cuda.synchronize()
    expected = xxh3_64(x.cpu().numpy().tobytes())
    dist.destroy_process_group()
    stagescope_torch.finish()
    con = sqlite3.connect(f"{run}.rank0.shard")
    rows = con.execute("SELECT op, state, out_checksum FROM collectives ORDER BY seq").fetchall()
    print(rows)
    ok = [r[0] for r in rows] == ["all_reduce", "broadcast"] and all(r[1] == "completed" for r in rows)
    ok = ok and (rows[0][2] & ((1 << 64) - 1)) == expected
    print("gpu_nccl_check:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
