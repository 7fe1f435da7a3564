"""Megatron-Core's own pipeline schedule (forward_backward_pipelining_without_interleaving) on a
tiny GPT, recorded through the stagescope backend: 2 ranks = 2 pipeline stages, Gloo, CPU.

Megatron-Core (0.16) assumes CUDA in its pipeline code even when the model is on the CPU:
p2p_communication allocates its receive buffers (and the shape exchange) on
torch.cuda.current_device(), the schedule allocates `total_num_tokens` on "cuda", and both call
torch.cuda.synchronize().  On a machine without a GPU, --cpu-shim redirects exactly those to the
CPU (`cpu_shim()` below: current_device -> "cpu", synchronize -> no-op, device="cuda" -> cpu in
the schedules module, and the attention's CUDA RNG tracker fork -> the CPU generator); with a GPU, run without it (and --inner nccl for the stagescope backend).

  torchrun --nproc-per-node=2 megatron_job.py --backend stagescope --out DIR [--cpu-shim]
Each rank saves its losses and parameters to DIR/rank<r>.pt.
"""

import argparse
import os

import torch
import torch.distributed as dist


def cpu_shim():
    """Points Megatron-Core's hard-coded CUDA allocations at the CPU (see the module doc)."""
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.synchronize = lambda *a, **k: None
    from megatron.core.pipeline_parallel import schedules

    class TorchOnCpu:
        """The `torch` the schedules module sees: device="cuda" becomes the CPU."""

        def __getattr__(self, name):
            attr = getattr(torch, name)
            if name in ("zeros", "ones", "empty", "tensor", "full"):
                def on_cpu(*a, **k):
                    if str(k.get("device", "")).startswith("cuda"):
                        k["device"] = "cpu"
                    return attr(*a, **k)
                return on_cpu
            return attr

    schedules.torch = TorchOnCpu()
    # Dropout regions fork the CUDA RNG tracker (even at dropout 0): no CUDA RNG here, the CPU
    # generator (seeded by the job) is used instead.
    import contextlib

    from megatron.core.tensor_parallel import random as mp_random
    mp_random.CudaRNGStatesTracker.fork = lambda self, name=None: contextlib.nullcontext()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["gloo", "stagescope"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--cpu-shim", action="store_true")
    args = ap.parse_args()
    if args.backend == "stagescope":
        import stagescope_torch  # noqa: F401
    if args.cpu_shim:
        cpu_shim()
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.transformer.transformer_config import TransformerConfig

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1,
                                             pipeline_model_parallel_size=world)
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    torch.manual_seed(1234)
    try:
        model_parallel_cuda_manual_seed(1234)
    except Exception:  # noqa: BLE001 - no CUDA RNG on a CPU machine; the CPU seed above applies
        pass

    seq, vocab, mbs = 16, 64, 2
    config = TransformerConfig(num_layers=2 * world, hidden_size=32, num_attention_heads=4,
                               use_cpu_initialization=True, pipeline_dtype=torch.float32,
                               params_dtype=torch.float32, pipeline_model_parallel_size=world,
                               bias_dropout_fusion=False, gradient_accumulation_fusion=False,
                               hidden_dropout=0.0, attention_dropout=0.0)
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
                     vocab_size=vocab, max_sequence_length=seq,
                     pre_process=parallel_state.is_pipeline_first_stage(),
                     post_process=parallel_state.is_pipeline_last_stage())
    model.model_type = None
    from megatron.core.enums import ModelType
    model.model_type = ModelType.encoder_or_decoder

    def batches(step):
        g = torch.Generator().manual_seed(100 + step)
        for _ in range(args.microbatches):
            tokens = torch.randint(0, vocab, (mbs, seq), generator=g)
            yield {"tokens": tokens, "labels": torch.roll(tokens, -1, 1),
                   "position_ids": torch.arange(seq).unsqueeze(0).expand(mbs, seq),
                   "attention_mask": torch.ones(mbs, 1, seq, seq, dtype=torch.bool)}

    def forward_step(data_iterator, model):
        b = next(data_iterator)
        out = model(b["tokens"], b["position_ids"], b["attention_mask"], labels=b["labels"])

        def loss_func(output):
            loss = output.float().mean()
            return loss, {"loss": loss.detach()}
        return out, loss_func

    fb = get_forward_backward_func()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for step in range(args.steps):
        if args.backend == "stagescope":
            stagescope_torch.step(step)
        opt.zero_grad()
        out = fb(forward_step_func=forward_step, data_iterator=batches(step), model=[model],
                 num_microbatches=args.microbatches, seq_length=seq, micro_batch_size=mbs,
                 forward_only=False)
        if args.backend == "stagescope":
            stagescope_torch.record_gradients(model, prefix=f"stage{rank}.")
        opt.step()
        losses.append([float(d["loss"]) for d in out])
    dist.barrier()
    os.makedirs(args.out, exist_ok=True)
    torch.save({"losses": losses, "params": {k: v.detach().clone() for k, v in model.state_dict().items()
                                             if isinstance(v, torch.Tensor)}},
               os.path.join(args.out, f"rank{rank}.pt"))
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
