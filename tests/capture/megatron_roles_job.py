"""Megatron-Core's P2PCommunicator on a pipeline group of 2 ranks, where the previous and the next
stage are the same rank, calling send_forward_backward_recv_forward_backward (what the
interleaved schedule calls in its steady state) for a few steps.

With config.batch_p2p_comm=True (`--batch-p2p 1`) megatron-core 0.19.2's `_batched_p2p_ops` posts
[send to prev (gradient), recv from prev (activation), send to next (activation), recv from next
(gradient)] on both ranks; the two sends and the two receives go to one peer, so the wire pairs
rank A's gradient with rank B's activation receive: each rank takes its peer's gradient as its
input (Megatron-LM PR #5271, issue #5100).  The activation and the gradient have the same shape,
so nothing fails.  With `--batch-p2p 0`, `_p2p_ops` orders the operations by rank parity and
sends one direction on the WORLD group: every message is taken in its role (the fixed twin).

    python -m torch.distributed.run --standalone --nproc-per-node=2 megatron_roles_job.py \\
        --batch-p2p 1 --out DIR

Each rank saves {"crossed": [bool per step]}: whether what it received as the activation was
its peer's gradient (the job knows what each tensor holds: activations are +(step+1), gradients
-(step+1), times 10 on rank 1).
"""

import argparse
import os

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-p2p", type=int, choices=[0, 1], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()
    import stagescope_torch
    import stagescope_torch.megatron as ssm

    ssm.enable_cpu()
    ssm.record_roles()
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.pipeline_parallel.p2p_communication import P2PCommunicator

    dist.init_process_group("stagescope")
    rank = dist.get_rank()
    pp = dist.new_group([0, 1], group_desc="pp")
    config = ModelParallelConfig(pipeline_model_parallel_size=2, pipeline_dtype=torch.float32,
                                 batch_p2p_comm=bool(args.batch_p2p), variable_seq_lengths=False)
    comm = P2PCommunicator(pp_group=pp, config=config)
    shape = (4, 2, 8)
    crossed = []
    for step in range(args.steps):
        stagescope_torch.step(step)
        scale = 10.0 if rank == 1 else 1.0
        activation = torch.full(shape, (step + 1) * scale)
        gradient = torch.full(shape, -(step + 1) * scale)
        got_activation, got_gradient = comm.send_forward_backward_recv_forward_backward(
            output_tensor=activation, input_tensor_grad=gradient, recv_prev=True, recv_next=True,
            tensor_shape=shape)
        crossed.append(bool(got_activation.flatten()[0].item() < 0))
    dist.barrier()
    os.makedirs(args.out, exist_ok=True)
    torch.save({"crossed": crossed}, os.path.join(args.out, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
