"""What the NCCL-replay jobs (nccl_first_use_job.py, nccl_first_batch_job.py) share: their command
line and their start under torchrun, on Gloo, the recording backend or NCCL (one GPU per rank,
communicators created lazily: no device_id)."""

import argparse
import datetime

import torch
import torch.distributed as dist


def parse_args(orders):
    """--backend gloo|stagescope|nccl, --order (one of `orders`), --timeout seconds."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["gloo", "stagescope", "nccl"], required=True)
    ap.add_argument("--order", choices=list(orders), required=True)
    ap.add_argument("--timeout", type=float, default=60)
    return ap.parse_args()


def start(args, world):
    """init_process_group on `world` ranks; returns (rank, device, timeout)."""
    if args.backend == "stagescope":
        import stagescope_torch  # noqa: F401  registers the backend, records batch_isend_irecv
    timeout = datetime.timedelta(seconds=args.timeout)
    dist.init_process_group(args.backend, timeout=timeout)
    rank = dist.get_rank()
    assert dist.get_world_size() == world, f"run on {world} ranks"
    device = torch.device("cpu")
    if args.backend == "nccl":  # lazy communicators: no device_id given
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    return rank, device, timeout
