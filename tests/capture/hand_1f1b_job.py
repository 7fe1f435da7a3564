"""A hand-written 1F1B pipeline (one module, one stage per rank, isend/irecv), recorded through the
stagescope backend and judged against stagescope's plan of the same layout (`check --plan`).

    python -m torch.distributed.run --standalone --nproc-per-node=P hand_1f1b_job.py \\
        --out DIR [--microbatches M] [--plant-warmup-bug]

Each stage is Linear(H, H) + tanh; the last stage's loss is the MSE to a target.  The schedule is
1F1B (docs/schedule.md §5.3): warmup = P - stage - 1 forwards, then one forward and one backward
per step, the combined communications posted together (send the activation and receive the
gradient; send the gradient and receive the activation), then the cooldown's backwards.

--plant-warmup-bug: stage 0 runs one warmup forward too many — the classic off-by-one.  Its
send of activation 1 and its receive of gradient 0 are then two actions in the other order (the
plan posts them together); the job still completes, since every send meets its receive.
"""

import argparse
import os

import torch
import torch.distributed as dist

import stagescope_torch  # noqa: F401  registers the backend; the run file comes from the env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=8)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--plant-warmup-bug", action="store_true")
    ap.add_argument("--declare-layout", help="a stagescope config: stagescope_torch.declare_layout")
    args = ap.parse_args()

    dist.init_process_group("stagescope")
    if args.declare_layout:
        with open(args.declare_layout) as f:
            stagescope_torch.declare_layout(f.read())
    rank, pp = dist.get_rank(), dist.get_world_size()
    M, B, H = args.microbatches, args.batch, args.hidden
    prev_rank = rank - 1 if rank > 0 else None
    next_rank = rank + 1 if rank < pp - 1 else None
    torch.manual_seed(1000 + rank)
    block = torch.nn.Linear(H, H)
    warmup = min(pp - rank - 1, M)
    if args.plant_warmup_bug and rank == 0:
        warmup = min(warmup + 1, M)

    def post(ops):
        for w in dist.batch_isend_irecv(ops) if ops else []:
            w.wait()

    inputs, outputs, losses = {}, {}, []

    def forward(mb, x):
        x = x.requires_grad_() if rank > 0 else x
        y = torch.tanh(block(x))
        inputs[mb], outputs[mb] = x, y
        if next_rank is None:
            g = torch.Generator().manual_seed(2000 + mb)
            loss = torch.nn.functional.mse_loss(y, torch.randn(B, H, generator=g)) / M
            losses.append(loss.item())
            outputs[mb] = loss
        return y.detach().contiguous()

    def source(mb):
        return torch.randn(B, H, generator=torch.Generator().manual_seed(100 + mb))

    def backward(mb, grad):
        if next_rank is None:
            outputs[mb].backward()
        else:
            outputs[mb].backward(grad)
        return inputs[mb].grad.contiguous() if prev_rank is not None else None

    stagescope_torch.step(0)
    fwd = bwd = 0
    recv_act = lambda: torch.empty(B, H)  # noqa: E731
    # warmup: receive, forward, send
    for _ in range(warmup):
        x = source(fwd)
        if prev_rank is not None:
            post([dist.P2POp(dist.irecv, x, prev_rank)])
        y = forward(fwd, x)
        post([dist.P2POp(dist.isend, y, next_rank)])
        fwd += 1
    x = source(fwd)
    if M - warmup > 0 and prev_rank is not None:
        post([dist.P2POp(dist.irecv, x, prev_rank)])
    # steady: forward, send the activation + receive the gradient, backward, send the gradient
    # + receive the next activation
    for i in range(M - warmup):
        y = forward(fwd, x)
        fwd += 1
        grad = torch.empty(B, H)
        ops = []
        if next_rank is not None:
            ops = [dist.P2POp(dist.isend, y, next_rank), dist.P2POp(dist.irecv, grad, next_rank)]
        post(ops)
        gx = backward(bwd, grad)
        bwd += 1
        last = i == M - warmup - 1
        x = source(fwd) if not last else None
        ops = []
        if prev_rank is not None:
            ops.append(dist.P2POp(dist.isend, gx, prev_rank))
            if not last:
                x = recv_act()
                ops.append(dist.P2POp(dist.irecv, x, prev_rank))
        post(ops)
    # cooldown: receive the gradient, backward, send the gradient
    while bwd < M:
        grad = torch.empty(B, H)
        if next_rank is not None:
            post([dist.P2POp(dist.irecv, grad, next_rank)])
        gx = backward(bwd, grad)
        bwd += 1
        if prev_rank is not None:
            post([dist.P2POp(dist.isend, gx, prev_rank)])
    dist.barrier()
    os.makedirs(args.out, exist_ok=True)
    torch.save({"losses": losses}, os.path.join(args.out, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
