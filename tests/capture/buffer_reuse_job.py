"""Two ranks that overwrite their buffers the moment an op is complete, used to test when the
stagescope backend takes the bytes it digests (app/capture/DigestWorker.h): a send's at post,
a receive's and an all_reduce's result at completion.  The digests run on a background thread,
so a backend that read the job's tensor there (instead of its own copy) would record the
overwritten values.

Rank 0 sends buffer = [i, i, ...] (4 MiB of float32) and overwrites it with -1 right after
wait(); rank 1 receives into one buffer, keeps a copy, overwrites the buffer with -7 at once and
logs XXH3-64 of the copy.
Then both all_reduce [rank + i] and overwrite the result.  Each rank saves its log (the
checksums it computed itself, in op order) to OUT/rank<r>.pt.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "checksum"))
from xxh3 import xxh3_64  # noqa: E402


def checksum(t):
    return xxh3_64(t.contiguous().numpy().tobytes())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--numel", type=int, default=1 << 20)
    args = ap.parse_args()
    import stagescope_torch
    dist.init_process_group("stagescope")
    rank = dist.get_rank()
    buf = torch.empty(args.numel)
    log = []
    for i in range(args.iters):
        stagescope_torch.step(i)
        if rank == 0:
            buf.fill_(float(i))
            log.append(("send", checksum(buf)))
            dist.isend(buf, 1).wait()
            buf.fill_(-1.0)
        else:
            dist.irecv(buf, 0).wait()
            got = buf.clone()  # what arrived; the buffer is overwritten at once
            buf.fill_(-7.0)
            log.append(("recv", checksum(got)))
        red = torch.full((args.numel,), float(rank + i))
        log.append(("all_reduce_in", checksum(red)))
        dist.all_reduce(red)
        result = red.clone()
        red.fill_(123.0)
        log.append(("all_reduce_out", checksum(result)))
    dist.barrier()
    os.makedirs(args.out, exist_ok=True)
    torch.save({"log": log}, os.path.join(args.out, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
