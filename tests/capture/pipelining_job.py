"""A torch.distributed.pipelining job (PyTorch's own schedules), used to test the stagescope
capture backend: one pipeline stage per rank, launched by torchrun.

Each stage is Linear(H, H) + tanh (the last without tanh), weights seeded by the stage
index; the loss is the MSE to a target.  --schedule picks GPipe, 1F1B or interleaved 1F1B
(two stages per rank, looped).  With --backend stagescope the job imports stagescope_torch,
marks steps and records gradients; everything else is identical.  Each rank saves its losses
and final parameters to OUT/rank<r>.pt.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                          ScheduleInterleaved1F1B)

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "interleaved": ScheduleInterleaved1F1B}


def make_stage(index, num_stages, hidden, depth):
    torch.manual_seed(1000 + index)
    layers = []
    for k in range(depth):
        layers.append(torch.nn.Linear(hidden, hidden))
        if index < num_stages - 1 or k < depth - 1:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["gloo", "stagescope"], required=True)
    ap.add_argument("--schedule", choices=sorted(SCHEDULES), default="1f1b")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8, help="global batch (split into microbatches)")
    ap.add_argument("--depth", type=int, default=1, help="Linear layers per stage")
    ap.add_argument("--out", required=True)
    ap.add_argument("--times", action="store_true",
                    help="also save the wall time of every step (barrier, step, barrier) and this "
                         "process's CPU seconds in it (all its threads: user + sys)")
    args = ap.parse_args()

    if args.backend == "stagescope":
        import stagescope_torch
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    pp = dist.new_group(list(range(world)), group_desc="pp")

    per_rank = 2 if args.schedule == "interleaved" else 1
    num_stages = world * per_rank
    indices = [rank + k * world for k in range(per_rank)]  # looped placement
    modules = {i: make_stage(i, num_stages, args.hidden, args.depth) for i in indices}
    stages = [PipelineStage(modules[i], i, num_stages, torch.device("cpu"), group=pp) for i in indices]
    loss_fn = torch.nn.functional.mse_loss
    schedule_cls = SCHEDULES[args.schedule]
    schedule = schedule_cls(stages if per_rank > 1 else stages[0], n_microbatches=args.microbatches,
                            loss_fn=loss_fn)
    first, last = 0 in indices, (num_stages - 1) in indices

    losses_all, times, cpu = [], [], []
    for it in range(args.steps):
        if args.times:
            dist.barrier()
            t0 = time.perf_counter()
            c0 = time.process_time()
        if args.backend == "stagescope":
            stagescope_torch.step(it)
        g = torch.Generator().manual_seed(10_000 + it)
        x = torch.randn(args.batch, args.hidden, generator=g)
        target = torch.randn(args.batch, args.hidden, generator=g)
        losses = []
        if first and last:
            schedule.step(x, target=target, losses=losses)
        elif first:
            schedule.step(x)
        elif last:
            schedule.step(target=target, losses=losses)
        else:
            schedule.step()
        if args.backend == "stagescope":
            for i, m in modules.items():
                stagescope_torch.record_gradients(m, prefix=f"stage{i}.")
        with torch.no_grad():
            for m in modules.values():
                for p in m.parameters():
                    p -= 0.05 * p.grad
                    p.grad = None
        losses_all.append([l.item() for l in losses])
        if args.times:
            dist.barrier()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)

    dist.barrier()
    os.makedirs(args.out, exist_ok=True)
    params = {f"stage{i}.{k}": v.clone() for i, m in modules.items() for k, v in m.state_dict().items()}
    torch.save({"losses": losses_all, "params": params, "times": times, "cpu": cpu}, os.path.join(args.out, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
