"""A job that completes on Gloo and would deadlock on NCCL (issue 39 c): the first
batch_isend_irecv on a group of three ranks is joined by two of them.  Ranks 0 and 1 exchange a
message in one batch_isend_irecv each on group "pp" (ranks 0, 1, 2) - the group's first call, which
on NCCL creates the group's communicator and so needs all three; rank 2 first waits, on group
"link" (ranks 1, 2), for a message rank 1 sends only after that batch.  Gloo completes it
(batches are single ops there).  --order fixed: the same exchanges as plain isend/irecv (a
communicator per pair, created by the two ranks that use it); it completes on either backend.

Run by torchrun on 3 ranks with --backend gloo or stagescope (the recording backend, which runs
Gloo inside), or nccl on a machine with three GPUs (one per rank) to confirm the prediction: the
batched order then ends by the group timeout (--timeout seconds, every wait has it)."""

import torch
import torch.distributed as dist

from nccl_job_setup import parse_args, start


def exchange(ops, batched):
    """Posts `ops` ((isend|irecv, tensor, peer, group) each) and waits for them."""
    if batched:
        works = dist.batch_isend_irecv([dist.P2POp(op, t, peer, group=g) for op, t, peer, g in ops])
    else:
        works = [op(t, peer, group=g) for op, t, peer, g in ops]
    for w in works:
        w.wait()


def main():
    args = parse_args(("batched", "fixed"))
    rank, device, timeout = start(args, 3)
    pp = dist.new_group([0, 1, 2], group_desc="pp", timeout=timeout)
    link = dist.new_group([1, 2], group_desc="link", timeout=timeout)
    batched = args.order == "batched"

    x = torch.full((4,), float(rank), device=device)
    y = torch.empty(4, device=device)
    if rank == 0:
        exchange([(dist.isend, x, 1, pp)], batched)
    elif rank == 1:
        exchange([(dist.irecv, y, 0, pp)], batched)
        assert y[0].item() == 0
        dist.send(x, 2, group=link)
        exchange([(dist.irecv, y, 2, pp)], batched)
        assert y[0].item() == 2
    else:
        dist.recv(y, 1, group=link)
        assert y[0].item() == 1
        exchange([(dist.isend, x, 1, pp)], batched)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
