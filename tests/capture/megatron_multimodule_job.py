"""Megatron-Core's own multimodule 1F1B on CPU: tiny encoder modules feeding a tiny language model,
each module on its own HyperCommGrid, wired by MultiModulePipelineCommunicator (bridges,
boundary broadcasts, P2P inside a module) and trained with
forward_backward_pipelining_without_interleaving, which picks backward_step_multimodule for a
MultiModuleProcessGroupCollection.

    python -m torch.distributed.run --standalone --nproc-per-node=N megatron_multimodule_job.py \\
        --backend stagescope|gloo --out DIR --encoder vision:1 [--encoder audio:1 ...] --llm-pp 2

Ranks are laid out in order: each encoder's grid (tp1 cp1 ppK dpD, `--encoder NAME:K[:D]`) at
the next rank offset, then the llm's (tp1 cp1 ppL dpE, `--llm-pp L --llm-dp E`); N must equal
the sum of pp x dp.  Layouts the Megatron tests use: `--encoder vision:1 --llm-pp 2` (3 ranks)
and `--encoder vision:2 --encoder audio:1 --llm-pp 2` (5 ranks: encoders of unequal depth);
`--encoder vision:1:2 --llm-pp 2` is a 2->1 fan-in, `--encoder vision:1 --llm-dp 2` a 1->2
fan-out.  A microbatch has --mbs samples; a module replica takes its dp share (the bridge
concatenates or splits along the batch), and replicas average their gradients (all_reduce on the
module's dp group) before the optimizer step.  A fourth field (`NAME:K:D:T`, `--llm-tp T`) gives a
module T tensor-parallel ranks holding the same replicated stage: only the bridge's leaders send
and receive (Megatron's get_leader_rank picks the source's *last* tp rank of its last stage and
the destination's first tp rank of its first stage), the others get the tensor from the boundary
broadcast.

Every module stage is one Linear(h, h) + tanh; an encoder's first stage reads its own features
[s_enc, b, h] from the batch, the llm's first stage concatenates what its bridges deliver along
the sequence, its last stage's loss is the mean squared error against the batch's target.
Each rank saves {"losses", "params", "stages"} to DIR/rank<r>.pt.  Megatron's CUDA
assumptions are redirected by stagescope_torch.megatron.enable_cpu() (it needs no stagescope
backend: a plain Gloo run uses it as well); with --backend stagescope the process groups are
named (stagescope_torch.megatron.name_groups).
"""

import argparse
import os

import torch
import torch.distributed as dist

from megatron_rank_model import RankModel

HIDDEN = 8
SEQ = {"vision": 4, "audio": 3}  # per-encoder sequence length (any other name: 2)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["gloo", "stagescope"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--encoder", action="append", default=[],
                    help="NAME:PP[:DP[:TP]], one per encoder feeding the llm (default vision:1)")
    ap.add_argument("--llm-pp", type=int, default=2)
    ap.add_argument("--llm-dp", type=int, default=1)
    ap.add_argument("--llm-tp", type=int, default=1,
                    help="tensor-parallel size (the stage is replicated across its tp ranks)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--mbs", type=int, default=2,
                    help="samples per microbatch (global); a module with dp D gives each replica mbs/D")
    ap.add_argument("--batch-p2p", type=int, default=1, help="config.batch_p2p_comm (1 or 0)")
    args = ap.parse_args()
    args.encoders, args.dp, args.tp = [], {"llm": args.llm_dp}, {"llm": args.llm_tp}
    for e in args.encoder or ["vision:1"]:
        name, pp, dp, tp = (e.split(":") + ["1", "1"])[:4]
        args.encoders.append((name, int(pp)))
        args.dp[name], args.tp[name] = int(dp), int(tp)
    for name, dp in args.dp.items():
        if args.mbs % dp:
            ap.error(f"--mbs {args.mbs} is not divisible by {name}'s dp {dp}")
    return args


def main():
    args = parse_args()
    if args.backend == "stagescope":
        import stagescope_torch  # noqa: F401  (registers the backend)
    import stagescope_torch.megatron as ssm

    from megatron.core.hyper_comm_grid import HyperCommGrid
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.pipeline_parallel.multimodule_communicator import MultiModulePipelineCommunicator
    from megatron.core.pipeline_parallel.schedules import forward_backward_pipelining_without_interleaving
    from megatron.core.process_groups_config import (MultiModuleProcessGroupCollection,
                                                     ProcessGroupCollection)

    ssm.enable_cpu()
    if args.backend == "stagescope":
        ssm.record_shape_preambles()  # shape messages stay shape messages of their payload
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    modules = args.encoders + [("llm", args.llm_pp)]
    needed = sum(args.tp[name] * pp * args.dp[name] for name, pp in modules)
    if needed != world:
        raise SystemExit(f"layout {modules} (dp {args.dp}, tp {args.tp}) needs {needed} ranks, got {world}")

    # One HyperCommGrid per module at consecutive rank offsets; every rank creates every group
    # (new_subgroups_by_enumeration is collective over the world).
    grids, offset = {}, 0
    for name, pp in modules:
        grid = HyperCommGrid([args.tp[name], 1, pp, args.dp[name]], ["tp", "cp", "pp", "dp"],
                             rank_offset=offset)
        for dims in ("tp", "cp", "pp", "dp"):
            grid.create_pg(dims)
        grids[name] = grid
        offset += grid.size
    topology = {name: ["llm"] for name, _ in args.encoders}
    topology["llm"] = []

    # variable_seq_lengths: required for multimodule (shapes travel before every payload)
    config = ModelParallelConfig(pipeline_dtype=torch.float32, params_dtype=torch.float32,
                                 variable_seq_lengths=True, batch_p2p_comm=bool(args.batch_p2p))
    comm = MultiModulePipelineCommunicator(grids, topology, config,
                                           dim_mapping={"s": 0, "b": 1, "h": 2})
    if args.backend == "stagescope":
        ssm.name_groups(grids, comm)
        # the layout and Megatron's own stage/warmup per rank, for `stagescope check`
        ssm.declare_layout(grids, topology, num_microbatches=args.microbatches,
                           micro_batch_size=args.mbs)

    # This rank's module stages, initialised from a seed of (module, stage) alone.
    stages, where = {}, {}
    pgs = {}
    for name, grid in grids.items():
        if not comm.is_current_rank_in_grid(grid):
            continue
        local = (rank - grid.rank_offset) // grid.shape[0]  # tp varies fastest, then (cp1) pp, dp
        pp_rank, dp_rank = local % grid.shape[2], local // grid.shape[2]
        # replicas of a stage start equal: the seed is (module, stage) alone
        torch.manual_seed(1000 + 10 * [m for m, _ in modules].index(name) + pp_rank)
        stages[name] = torch.nn.Linear(HIDDEN, HIDDEN)
        where[name] = (pp_rank, grid.shape[2], dp_rank, grid.shape[3])
        pgc = ProcessGroupCollection()
        for dims in ("tp", "cp", "pp", "dp"):
            setattr(pgc, dims, grid.get_pg(dims))
        pgs[name] = pgc
    model = RankModel(config, stages)
    warmup = comm.total_stages - comm.current_stage - 1  # what the schedule will use
    print(f"rank {rank}: " + ", ".join(f"{n} stage {w[0]} of {w[1]} replica {w[2]} of {w[3]}"
                                       for n, w in where.items())
          + f"; Megatron: total_stages {comm.total_stages}, current_stage {comm.current_stage}, "
          f"warmup {min(warmup, args.microbatches)}", flush=True)
    pg_collection = MultiModuleProcessGroupCollection(
        module_pgs=pgs, language_model_module_name="llm" if "llm" in pgs else None)

    def batches(step):
        g = torch.Generator().manual_seed(100 + step)
        total = sum(SEQ.get(n, 2) for n, _ in args.encoders)
        for _ in range(args.microbatches):
            b = {n: torch.randn(SEQ.get(n, 2), args.mbs, HIDDEN, generator=g) for n, _ in args.encoders}
            b["target"] = torch.randn(total, args.mbs, HIDDEN, generator=g)
            yield b

    def forward_step(data_iterator, model):
        batch = next(data_iterator)
        outputs = {}
        for name, layer in model.stages.items():
            pp_rank, _, dp_rank, dp = where[name]
            mine = slice(dp_rank * args.mbs // dp, (dp_rank + 1) * args.mbs // dp)  # this replica's samples
            if name == "llm" and pp_rank == 0:  # what the bridges delivered, in topology order
                x = torch.cat([model.inputs[n] for n, _ in args.encoders], dim=0)
            elif pp_rank == 0:  # an encoder's first stage reads its features
                x = batch[name][:, mine]
            else:
                x = model.inputs[name]
            outputs[name] = torch.tanh(layer(x))

        def loss_func(output):
            pp_rank, _, dp_rank, dp = where["llm"]
            mine = slice(dp_rank * args.mbs // dp, (dp_rank + 1) * args.mbs // dp)
            loss = torch.nn.functional.mse_loss(output, batch["target"][:, mine])
            return loss, {"loss": loss.detach()}
        last = "llm" in where and where["llm"][0] == where["llm"][1] - 1
        return (outputs["llm"] if last else outputs), loss_func

    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(args.steps):
        if args.backend == "stagescope":
            import stagescope_torch
            stagescope_torch.step(step)
        opt.zero_grad()
        out = forward_backward_pipelining_without_interleaving(
            forward_step_func=forward_step, data_iterator=batches(step), model=[model],
            num_microbatches=args.microbatches, seq_length=0, micro_batch_size=args.mbs,
            forward_only=False, p2p_communicator=comm, pg_collection=pg_collection)
        for name, layer in model.stages.items():  # data parallelism: the replicas' mean gradient
            if where[name][3] > 1:
                for p in layer.parameters():
                    dist.all_reduce(p.grad, group=grids[name].get_pg("dp"))
                    p.grad /= where[name][3]
        if args.backend == "stagescope":
            for name, layer in model.stages.items():
                stagescope_torch.record_gradients(layer, prefix=f"{name}.stage{where[name][0]}.")
            import stagescope_torch.megatron as ssm
            ssm.record_losses(out, key="loss", dp=where["llm"][2] if "llm" in where else 0)
        opt.step()
        losses.append([float(d["loss"]) for d in out])
    dist.barrier()
    os.makedirs(args.out, exist_ok=True)
    torch.save({"losses": losses, "stages": {n: list(w) for n, w in where.items()},
                "total_stages": comm.total_stages, "current_stage": comm.current_stage,
                "params": {k: v.detach().clone() for k, v in model.state_dict().items()}},
               os.path.join(args.out, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
