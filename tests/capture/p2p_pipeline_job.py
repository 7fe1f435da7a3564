"""A hand-written pipeline-parallel training job (isend/irecv, batch_isend_irecv, all_reduce),
used to test the stagescope capture backend.  One process per rank, launched by torchrun.

Layout: world = pp * dp ranks; rank r is pipeline stage r % pp of data-parallel replica
r // pp.  Each stage is Linear(H, H) + tanh; the last stage's loss is the MSE to a target.
Schedule: all forwards of the microbatches, then all backwards (GPipe), then the gradients
are all-reduced over the dp group, then plain SGD.

With --backend stagescope the job imports stagescope_torch and names its groups "pp" and
"dp"; everything else is identical, so the two backends must give bitwise identical results.
Each rank saves its losses, final parameters and a log of every tensor it sent or received
(peer, shape, dtype, XXH3-64 of the bytes computed here in Python) to OUT/rank<r>.pt.
"""

import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "checksum"))
from xxh3 import xxh3_64  # noqa: E402


def fingerprint(tensor):
    """XXH3-64 of the tensor's bytes: the function stagescope records (docs/run-file.md)."""
    return xxh3_64(tensor.detach().contiguous().numpy().tobytes())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["gloo", "stagescope"], required=True)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=8)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--out", required=True)
    ap.add_argument("--plant-shape-bug", action="store_true",
                    help="the last stage posts its step-1 microbatch-0 receive with the "
                         "transposed shape (same bytes, wrong shape)")
    ap.add_argument("--plant-hang", choices=["skip-recv", "skip-allreduce"],
                    help="skip-recv: the last stage skips its receive of the last microbatch's "
                         "activation in iteration 0; skip-allreduce: the last stage skips the "
                         "world loss all_reduce of iteration 0 (both hang the job)")
    ap.add_argument("--timeout", type=float, default=1800, help="the process groups' timeout (s)")
    ap.add_argument("--shape-preamble", choices=["off", "sent", "recorded"], default="off",
                    help="sent: every activation is preceded by its shape (an int64 [2] tensor) "
                         "on the same channel, as Megatron-Core does; recorded: also "
                         "stagescope_torch.shape_preambles() is on")
    args = ap.parse_args()

    if args.backend == "stagescope":
        import stagescope_torch  # noqa: F401  registers the backend; run file from the env
        if args.shape_preamble == "recorded":
            stagescope_torch.shape_preambles(True)
    timeout = datetime.timedelta(seconds=args.timeout)
    dist.init_process_group(args.backend, timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    pp = args.pp
    dp = world // pp
    stage, replica = rank % pp, rank // pp
    pp_groups = [dist.new_group([d * pp + s for s in range(pp)], group_desc="pp", timeout=timeout)
                 for d in range(dp)]
    dp_groups = [dist.new_group([d * pp + s for d in range(dp)], group_desc="dp", timeout=timeout)
                 for s in range(pp)]
    pp_group, dp_group = pp_groups[replica], dp_groups[stage]
    prev_rank = rank - 1 if stage > 0 else None
    next_rank = rank + 1 if stage < pp - 1 else None

    torch.manual_seed(1000 + stage)  # the same weights on every replica of a stage
    block = torch.nn.Linear(args.hidden, args.hidden)
    B, H, M = args.batch, args.hidden, args.microbatches
    log, losses = [], []

    def logged(kind, peer, t):
        log.append((kind, peer, tuple(t.shape), str(t.dtype), fingerprint(t)))

    for it in range(args.steps):
        if args.backend == "stagescope":
            stagescope_torch.step(it)
        inputs, outputs, mb_losses = [], [], []
        for mb in range(M):  # forwards
            if stage == 0:
                g = torch.Generator().manual_seed(10_000 * it + 100 * replica + mb)
                x = torch.randn(B, H, generator=g)
            else:
                shape = (H, B) if (args.plant_shape_bug and stage == pp - 1 and it == 1 and mb == 0) else (B, H)
                buf = torch.empty(shape)
                if args.plant_hang == "skip-recv" and stage == pp - 1 and it == 0 and mb == M - 1:
                    buf.zero_()  # planted bug: this receive is never posted
                else:
                    if args.shape_preamble != "off":
                        dims = torch.empty(2, dtype=torch.int64)
                        dist.recv(dims, prev_rank, group=pp_group)
                        assert tuple(dims.tolist()) == (B, H), dims
                    for w in dist.batch_isend_irecv([dist.P2POp(dist.irecv, buf, prev_rank, pp_group)]):
                        w.wait()
                logged("recv", prev_rank, buf)
                x = buf.view(B, H).requires_grad_()
            y = torch.tanh(block(x))
            if next_rank is not None:
                out = y.detach().contiguous()
                if args.shape_preamble != "off":
                    dist.send(torch.tensor(out.shape, dtype=torch.int64), next_rank, group=pp_group)
                for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, out, next_rank, pp_group)]):
                    w.wait()
                logged("send", next_rank, out)
            else:
                g = torch.Generator().manual_seed(20_000 * it + 100 * replica + mb)
                loss = torch.nn.functional.mse_loss(y, torch.randn(B, H, generator=g))
                mb_losses.append(loss)
            inputs.append(x)
            outputs.append(y)
        for mb in range(M):  # backwards
            if next_rank is None:
                (mb_losses[mb] / M).backward()
            else:
                grad = torch.empty(B, H)
                dist.irecv(grad, next_rank, group=pp_group).wait()
                logged("recv", next_rank, grad)
                outputs[mb].backward(grad)
            if prev_rank is not None:
                gx = inputs[mb].grad.contiguous()
                dist.isend(gx, prev_rank, group=pp_group).wait()
                logged("send", prev_rank, gx)
        for p in block.parameters():  # data-parallel reduction, then SGD
            if dp > 1:
                dist.all_reduce(p.grad, group=dp_group)
                p.grad /= dp
        if args.backend == "stagescope":
            stagescope_torch.record_gradients(block, prefix=f"stage{stage}.")
        with torch.no_grad():
            for p in block.parameters():
                p -= 0.1 * p.grad
                p.grad = None
        total = torch.tensor([sum(l.item() for l in mb_losses)], dtype=torch.float64)
        if not (args.plant_hang == "skip-allreduce" and stage == pp - 1 and it == 0):
            dist.all_reduce(total)  # every rank learns the step's loss (world group)
        losses.append(total.item())

    dist.barrier()
    os.makedirs(args.out, exist_ok=True)
    torch.save({"losses": losses, "params": {k: v.clone() for k, v in block.state_dict().items()},
                "log": log, "stage": stage, "replica": replica},
               os.path.join(args.out, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
