"""A two-stage pipeline written by hand with isend/irecv, recorded by stagescope.

    STAGESCOPE_RUN=runs/mine.db .venv/bin/torchrun --standalone --nproc-per-node=2 \
        assets/examples/capture_two_stage.py

The only stagescope-specific lines are the import, the backend name and the optional
step()/record_gradients() calls.
"""
import torch
import torch.distributed as dist

import stagescope_torch  # registers the "stagescope" backend (wraps Gloo)

dist.init_process_group("stagescope")  # run file and level from STAGESCOPE_RUN / STAGESCOPE_LEVEL
rank = dist.get_rank()
pp = dist.new_group([0, 1], group_desc="pp")  # edges read "pp:stage0->stage1"
torch.manual_seed(rank)
layer = torch.nn.Linear(16, 16)

for step in range(3):
    stagescope_torch.step(step)
    for mb in range(4):
        if rank == 0:
            x = torch.randn(8, 16)
            y = layer(x)
            dist.isend(y.detach(), 1, group=pp).wait()
            grad = torch.empty(8, 16)
            dist.irecv(grad, 1, group=pp).wait()
            y.backward(grad)
        else:
            x = torch.empty(8, 16)
            dist.irecv(x, 0, group=pp).wait()
            x.requires_grad_()
            loss = layer(x).square().mean()
            loss.backward()
            dist.isend(x.grad, 0, group=pp).wait()
    stagescope_torch.record_gradients(layer, prefix=f"stage{rank}.")
    with torch.no_grad():
        for p in layer.parameters():
            p -= 0.01 * p.grad
            p.grad = None
    dist.barrier()

dist.destroy_process_group()
