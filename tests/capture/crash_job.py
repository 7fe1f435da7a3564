"""Two ranks of a captured job that end badly, one way per --mode, to test that the capture
tells how a job ended (docs/capture.md "How a job ended"):

  raise_all   every rank raises right after init_process_group, before its first operation
  raise_one   two iterations of rank 0 -> rank 1 sends; in iteration 1 rank 1 raises after its
              receive, while rank 0 waits in a barrier (torchrun then stops rank 0)
  abort       rank 0 sends 384 bytes where rank 1 posted a receive of 256: Gloo throws on its
              own thread ("Received data size doesn't match expected size") and the process
              aborts through std::terminate

    python -m torch.distributed.run --standalone --nproc-per-node=2 crash_job.py --mode M
"""

import argparse
import datetime

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["raise_all", "raise_one", "abort"], required=True)
    args = ap.parse_args()
    import stagescope_torch

    dist.init_process_group("stagescope", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    if args.mode == "raise_all":
        raise RuntimeError(f"planted failure on rank {rank} before any operation")
    if args.mode == "abort":
        stagescope_torch.step(0)
        if rank == 0:
            dist.send(torch.ones(96), 1)  # 384 bytes
        else:
            dist.recv(torch.empty(64), 0)  # expects 256 bytes
        dist.barrier()
        return
    for i in range(2):
        stagescope_torch.step(i)
        buf = torch.full((16,), float(i))
        if rank == 0:
            dist.send(buf, 1)
        else:
            dist.recv(buf, 0)
            if i == 1:
                raise ValueError("planted failure in iteration 1 after the receive")
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
