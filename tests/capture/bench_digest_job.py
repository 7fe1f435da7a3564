"""The job thread's cost of recording at level stats (tests/capture/bench_capture.py --digest):
2 ranks exchange --numel float32 (send/recv, then all_reduce) --iters times; each rank measures,
per iteration, the wall time and the CPU time of its own thread (time.thread_time: the
DigestWorker's thread is not counted, and other processes' load inflates it far less than wall
time).  Saves the per-iteration samples to OUT/rank<r>.pt."""

import argparse
import os
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["gloo", "stagescope"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--numel", type=int, default=1 << 20)
    a = ap.parse_args()
    if a.backend == "stagescope":
        import stagescope_torch  # noqa: F401
    dist.init_process_group(a.backend)
    rank = dist.get_rank()
    x = torch.randn(a.numel, generator=torch.Generator().manual_seed(rank))
    wall, cpu = [], []
    for i in range(a.iters):
        t0, c0 = time.perf_counter(), time.thread_time()
        if rank == 0:
            dist.send(x, 1)
            dist.recv(x, 1)
        else:
            dist.recv(x, 0)
            dist.send(x, 0)
        dist.all_reduce(x)
        x.mul_(0.5)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    dist.barrier()
    os.makedirs(a.out, exist_ok=True)
    torch.save({"wall": wall, "cpu": cpu}, os.path.join(a.out, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
