"""A job that completes on Gloo and would deadlock on NCCL (Megatron-LM PR #5370's shape): rank 0
(an encoder's last stage) posts a non-blocking send of its activation to rank 1 (the language
model's first stage) on the pipeline group, then joins a broadcast on the bridge group; rank 1
joins the bridge broadcast first and receives after.  Gloo connected both groups when they were
created and buffers the send.  NCCL creates each communicator at its first use, by all its
members together: rank 0 waits in the pair communicator's creation for rank 1, which waits in the
bridge communicator's for rank 0.  --order fixed: rank 1 receives before the broadcast, so both
ranks reach each group at the same point of their order; it completes on either backend.

Run by torchrun on 2 ranks with --backend gloo or stagescope (the recording backend, which runs
Gloo inside), or nccl on a machine with two GPUs (one per rank) to confirm the prediction: the
skewed order then ends by the group timeout (--timeout seconds, every wait has it)."""

import torch
import torch.distributed as dist

from nccl_job_setup import parse_args, start


def main():
    args = parse_args(("skewed", "fixed"))
    rank, device, timeout = start(args, 2)
    pp = dist.new_group([0, 1], group_desc="pp", timeout=timeout)
    bridge = dist.new_group([0, 1], group_desc="bridge", timeout=timeout)

    activation = torch.arange(8, dtype=torch.float32, device=device)
    shape = torch.tensor([8], dtype=torch.int64, device=device)
    if rank == 0:
        send = dist.isend(activation, 1, group=pp)
        dist.broadcast(shape, src=0, group=bridge)
        send.wait()
    else:
        received = torch.empty(8, device=device)
        if args.order == "fixed":
            dist.recv(received, 0, group=pp)
            dist.broadcast(shape, src=0, group=bridge)
        else:
            dist.broadcast(shape, src=0, group=bridge)
            dist.recv(received, 0, group=pp)
        assert torch.equal(received, activation), "the activation arrived changed"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
