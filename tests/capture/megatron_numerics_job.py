"""A Megatron-Core 0.19.2 multimodule job trained the way real jobs are: each module wrapped in
Megatron's DistributedDataParallel, the schedule's finalize_model_grads_func reducing them, and
(--fp16) Megatron's float16 optimizers with dynamic grad scalers inside one MimoOptimizer.  Its
flags reproduce three upstream bugs of 2026 on CPU, each next to its fix:

    python -m torch.distributed.run --standalone --nproc-per-node=3 megatron_numerics_job.py \\
        --backend stagescope|gloo --out DIR [--finalize own_dp|language_branch|module_local]
        [--llm-per-token 0|1] [--vision-per-token 0|1] [--fp16 --scalers independent|synced
        --overflow-at ITER] [--overlap-grad-reduce 1]

Layout: vision tp1·pp1·dp2 (ranks 0, 1) -> llm tp1·pp1·dp1 (rank 2), a 2 -> 1 fan-in.  Each
module stage is one Linear(8, 8) + tanh; the llm's loss is the squared error against the batch's
target, as a mean (the schedule divides it by the microbatches) or, with calculate_per_token_loss,
as a sum with its token count (finalize divides by the global count).

--finalize (the schedule's finalize_model_grads_func; every variant calls Megatron's own
finalize_model_grads per module):
  own_dp           megatron-core 0.19.2 per module: each module's DDP averages over its own dp:
                   the encoder's gradient is d_L/d_E of the right one (docs/schedule.md §7.1;
                   Megatron-Bridge PR #4066).  Per-token: the encoder is not divided by the
                   token count at all.
  language_branch  Megatron-Bridge after PR #4066, before PR #5555: the correction is chosen by
                   the language model's calculate_per_token_loss and assumes every module's DDP
                   reduced the same way: wrong when the modules disagree (x 1/d_E or x d_E).
  module_local     after PR #5555: each module's correction follows its own DDP's reduction.
--scalers (--fp16):
  independent      megatron-core 0.19.2's MimoOptimizer: each inner optimizer updates its own
                   scaler from its own found-inf before the world-wide skip decision: after an
                   encoder-only overflow the scalers differ (Megatron-Bridge PR #5591).
  synced           the fix described in PR #5591: snapshot the scalers, prepare the gradients,
                   reduce found-inf over the world, restore and replay one update with it.
--overlap-grad-reduce 1: DDP launches each bucket group's reduction from the last microbatch's
backward hooks (asynchronously), as real jobs do.
--overflow-at I plants an Inf into one vision gradient on rank 0 in iteration I (what an fp16
overflow in the encoder's backward leaves); the step is skipped.

With --backend stagescope the job declares its layout and records, through
stagescope_torch.megatron, each module's gradients before and after the reduction with its loss
normalisation (audited_finalize) and each module's loss scale, found-inf and skip
(audited_step).  Each rank saves {"losses", "grads", "scales"} to DIR/rank<r>.pt.
"""

import argparse
import os

import torch
import torch.distributed as dist

from megatron_rank_model import RankModel

HIDDEN, SEQ = 8, 4


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["gloo", "stagescope"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--finalize", choices=["own_dp", "language_branch", "module_local"],
                    default="module_local")
    ap.add_argument("--llm-per-token", type=int, default=0)
    ap.add_argument("--vision-per-token", type=int, default=0)
    ap.add_argument("--fp16", action="store_true")
    ap.add_argument("--scalers", choices=["independent", "synced"], default="synced")
    ap.add_argument("--overflow-at", type=int, default=-1)
    ap.add_argument("--overlap-grad-reduce", type=int, default=0,
                    help="DistributedDataParallelConfig.overlap_grad_reduce (1: the reduction is "
                         "launched from the backward hooks, asynchronously)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=2)
    ap.add_argument("--mbs", type=int, default=2)
    return ap.parse_args()


def main():
    args = parse_args()
    if args.backend == "stagescope":
        import stagescope_torch  # noqa: F401  (registers the backend)
    import stagescope_torch.megatron as ssm

    from megatron.core.distributed import (DistributedDataParallel, DistributedDataParallelConfig,
                                           finalize_model_grads)
    from megatron.core.hyper_comm_grid import HyperCommGrid
    from megatron.core.models.mimo.optimizer import MimoOptimizer, ModuleOptimizerInfo
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.pipeline_parallel.multimodule_communicator import \
        MultiModulePipelineCommunicator
    from megatron.core.pipeline_parallel.schedules import \
        forward_backward_pipelining_without_interleaving
    from megatron.core.process_groups_config import (MultiModuleProcessGroupCollection,
                                                     ProcessGroupCollection)
    from megatron.core.transformer.transformer_config import TransformerConfig

    ssm.enable_cpu()
    if args.backend == "stagescope":
        ssm.record_shape_preambles()
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 3:
        raise SystemExit(f"the layout vision dp2 -> llm dp1 needs 3 ranks, got {world}")
    dtype = torch.float16 if args.fp16 else torch.float32

    grids, offset = {}, 0
    for name, dp in (("vision", 2), ("llm", 1)):
        grid = HyperCommGrid([1, 1, 1, dp], ["tp", "cp", "pp", "dp"], rank_offset=offset)
        for dims in ("tp", "cp", "pp", "dp", ["dp", "cp"], ["tp", "pp"], ["tp", "cp", "dp", "pp"]):
            grid.create_pg(dims)
        grids[name] = grid
        offset += grid.size
    topology = {"vision": ["llm"], "llm": []}
    dp_of = {name: grid.shape[3] for name, grid in grids.items()}
    per_token = {"vision": bool(args.vision_per_token), "llm": bool(args.llm_per_token)}

    def module_config(name):
        return TransformerConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=1,
                                 use_cpu_initialization=True, params_dtype=dtype,
                                 pipeline_dtype=dtype, fp16=args.fp16,
                                 variable_seq_lengths=True, moe_token_dispatcher_type="alltoall",
                                 calculate_per_token_loss=per_token[name])

    # The schedule's config is the language model's (it decides whether num_tokens is passed).
    config = module_config("llm")
    comm = MultiModulePipelineCommunicator(grids, topology, config,
                                           dim_mapping={"s": 0, "b": 1, "h": 2})
    if args.backend == "stagescope":
        ssm.name_groups(grids, comm)
        ssm.declare_layout(grids, topology, num_microbatches=args.microbatches,
                           micro_batch_size=args.mbs)

    stages, pgs, where = {}, {}, {}
    for index, (name, grid) in enumerate(grids.items()):
        if not comm.is_current_rank_in_grid(grid):
            continue
        torch.manual_seed(1000 + index)  # replicas of a module start equal
        layer = torch.nn.Linear(HIDDEN, HIDDEN).to(dtype)
        pgc = ProcessGroupCollection()
        pgc.tp, pgc.cp, pgc.pp, pgc.dp = (grid.get_pg(d) for d in ("tp", "cp", "pp", "dp"))
        pgc.dp_cp, pgc.mp = grid.get_pg(["dp", "cp"]), grid.get_pg(["tp", "pp"])
        pgc.intra_dist_opt = grid.get_pg(["tp", "cp", "dp", "pp"])
        pgc.embd, pgc.pos_embd = None, None
        pgc.ep, pgc.expt_dp = pgc.tp, pgc.dp  # no experts: size-1 ep, the dense dp group
        pgc.tp_ep_pp = pgc.mp
        ddp = DistributedDataParallel(
            module_config(name),
            DistributedDataParallelConfig(grad_reduce_in_fp32=True,
                                          overlap_grad_reduce=bool(args.overlap_grad_reduce),
                                          use_distributed_optimizer=False),
            layer, pg_collection=pgc)
        stages[name], pgs[name] = ddp, pgc
        where[name] = (rank - grid.rank_offset) % dp_of[name]  # dp replica
    model = RankModel(config, stages)
    pg_collection = MultiModuleProcessGroupCollection(
        module_pgs=pgs, language_model_module_name="llm" if "llm" in pgs else None)
    llm_last_rank = grids["llm"].rank_offset + grids["llm"].size - 1

    def finalize(model_chunks, num_tokens, pg_collection=None, force_all_reduce=False):
        """The schedule's finalize_model_grads_func: Megatron's finalize_model_grads per module,
        then the --finalize variant's correction."""
        lang_per_token = num_tokens is not None
        for name, ddp in stages.items():
            tokens = num_tokens if (args.finalize == "own_dp" or name == "llm") else None
            finalize_model_grads([ddp], tokens, pg_collection=pgs[name],
                                 force_all_reduce=force_all_reduce)
        if args.finalize == "own_dp":
            return
        # the global token count, from the llm's last stage to every rank
        total = torch.zeros([], dtype=torch.int)
        if lang_per_token:
            if rank == llm_last_rank:
                total.copy_(num_tokens)
            dist.broadcast(total, src=llm_last_rank)
        d_l = dp_of["llm"]
        for name, ddp in stages.items():
            if name == "llm":
                continue
            d_e = dp_of[name]
            # how this module's DDP reduced: the language's way (language_branch assumes it) or
            # its own config's (module_local)
            summed = per_token["llm"] if args.finalize == "language_branch" else per_token[name]
            if lang_per_token:
                factor = (1.0 if summed else d_e) / float(total)
            else:
                factor = (1.0 if summed else d_e) / d_l
            ddp.scale_gradients(factor)

    if args.backend == "stagescope":
        config.finalize_model_grads_func = ssm.audited_finalize(
            finalize, stages, language_model="llm", num_microbatches=args.microbatches,
            replicas={name: where[name] for name in stages})
    else:
        config.finalize_model_grads_func = finalize

    # fp16: one inner float16 optimizer (dynamic grad scaler) per module inside a MimoOptimizer
    optimizer = None
    if args.fp16:
        ocfg = OptimizerConfig(optimizer="sgd", lr=0.05, fp16=True, initial_loss_scale=8.0,
                               min_loss_scale=1.0, loss_scale_window=1000, hysteresis=1,
                               clip_grad=0.0)
        infos = {}
        for name, grid in grids.items():
            inner = (get_megatron_optimizer(ocfg, [stages[name]], pg_collection=pgs[name],
                                            use_gloo_process_groups=False)
                     if name in stages else None)
            infos[name] = ModuleOptimizerInfo(optimizer=inner, grid=grid,
                                              pg_collection=pgs.get(name),
                                              is_active=name in stages)
        optimizer = (synced_scalers(MimoOptimizer) if args.scalers == "synced"
                     else MimoOptimizer)(infos, ocfg)
        config.grad_scale_func = optimizer.scale_loss
    else:
        plain = torch.optim.SGD([p for s in stages.values() for p in s.parameters()], lr=0.05)

    def batches(step):
        g = torch.Generator().manual_seed(100 + step)
        for _ in range(args.microbatches):
            yield {"vision": torch.randn(SEQ, args.mbs, HIDDEN, generator=g).to(dtype),
                   "target": torch.randn(SEQ, args.mbs, HIDDEN, generator=g).to(dtype)}

    def forward_step(data_iterator, model):
        batch = next(data_iterator)
        outputs = {}
        for name, ddp in model.stages.items():
            if name == "vision":
                mine = slice(where[name] * args.mbs // 2, (where[name] + 1) * args.mbs // 2)
                x = batch["vision"][:, mine]
            else:
                x = model.inputs["vision"]
            outputs[name] = torch.tanh(ddp(x))

        def loss_func(output):
            err = (output.float() - batch["target"].float()) ** 2
            tokens = torch.tensor(err.shape[0] * err.shape[1], dtype=torch.int)
            if per_token["llm"]:  # a sum over tokens and its count: finalize divides
                loss = err.mean(dim=-1).sum()
                return loss, tokens, {"loss": loss.detach() / tokens}
            loss = err.mean()
            return loss, {"loss": loss.detach()}
        return (outputs["llm"] if "llm" in outputs else outputs), loss_func

    overflow_hook = None
    losses, grads, scales = [], [], []
    for step in range(args.steps):
        if args.backend == "stagescope":
            import stagescope_torch
            stagescope_torch.step(step)
        for ddp in stages.values():
            ddp.zero_grad_buffer()
        if optimizer is not None:
            optimizer.zero_grad()
        if step == args.overflow_at and rank == 0:  # an encoder-only overflow
            weight = stages["vision"].module.weight
            overflow_hook = weight.register_hook(lambda g: g * float("inf"))
        out = forward_backward_pipelining_without_interleaving(
            forward_step_func=forward_step, data_iterator=batches(step), model=[model],
            num_microbatches=args.microbatches, seq_length=0, micro_batch_size=args.mbs,
            forward_only=False, p2p_communicator=comm, pg_collection=pg_collection)
        if overflow_hook is not None:
            overflow_hook.remove()
            overflow_hook = None
        grads.append({f"{n}.{k}": p.main_grad.clone() for n, s in stages.items()
                      for k, p in s.module.named_parameters()})
        if optimizer is not None:
            if args.backend == "stagescope":
                ssm.audited_step(optimizer, replicas=where)
            else:
                optimizer.step()
            scales.append({n: float(i.optimizer.get_loss_scale()) for n, i in
                           optimizer.module_infos.items() if i.is_active})
        else:
            for s in stages.values():
                for p in s.parameters():
                    p.grad = p.main_grad.to(p.dtype)
            plain.step()
        losses.append([float(d["loss"]) for d in out])
    dist.barrier()
    os.makedirs(args.out, exist_ok=True)
    torch.save({"losses": losses, "grads": grads, "scales": scales},
               os.path.join(args.out, f"rank{rank}.pt"))
    dist.destroy_process_group()


def synced_scalers(mimo_optimizer_class):
    """MimoOptimizer whose inner grad scalers take one update from the world-wide found-inf
    (the fix Megatron-Bridge PR #5591 describes): snapshot each scaler, prepare the gradients as
    before, reduce found-inf over the world, restore the snapshots and update each with it."""

    class SyncedScalersMimoOptimizer(mimo_optimizer_class):
        def prepare_grads(self):
            scalers = [o.grad_scaler for opt in self._active_optimizers
                       for o in (getattr(opt, "chained_optimizers", None) or [opt])
                       if getattr(o, "grad_scaler", None) is not None]
            saved = [(s._scale.clone(), s._growth_tracker, s._hysteresis_tracker)
                     for s in scalers]
            found = super().prepare_grads()
            flag = torch.tensor([1.0 if found else 0.0])
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            found = bool(flag.item() > 0)
            for s, (scale, growth, hysteresis) in zip(scalers, saved):
                s._scale, s._growth_tracker, s._hysteresis_tracker = scale, growth, hysteresis
                s.update(found)
            return found

    return SyncedScalersMimoOptimizer


if __name__ == "__main__":
    main()
