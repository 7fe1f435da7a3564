"""Record your own PyTorch job into a stagescope run file.

    import stagescope_torch                      # registers the "stagescope" c10d backend
    stagescope_torch.configure(run="runs/job.db", level="stats")   # or STAGESCOPE_RUN=...
    dist.init_process_group("stagescope", ...)   # wraps Gloo; every op is forwarded unchanged
    pp = dist.new_group([0, 1], group_desc="pp") # edges read "pp:stage0->stage1"
    for i in range(steps):
        stagescope_torch.step(i)                 # iteration boundary
        ...                                      # the job's own isend/irecv/collectives
        stagescope_torch.record_gradients(model) # after backward
    dist.destroy_process_group()                 # rank files are closed at exit

Then `stagescope merge runs/job.db && stagescope check runs/job.db`.  docs/capture.md has
the details: what is recorded per level, how messages are identified without a plan.
"""

import atexit
import multiprocessing.util
import os

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroupGloo

from . import _build_info


def _check_torch_build():
    """One line, before the extension is loaded, when this Python or this torch is not the one it
    was compiled against (the extension is per Python version, libtorch's C++ ABI per torch build:
    loading it anyway fails obscurely or crashes)."""
    import sys
    built_py = ".".join(_build_info.PYTHON_VERSION.split(".")[:2])
    have_py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if built_py != have_py:
        raise ImportError(
            f"stagescope_torch at {os.path.dirname(__file__)} was built for Python {built_py}, not "
            f"{sys.executable} (Python {have_py}): build it for this Python with "
            f"scripts/build-capture-for.sh {sys.executable}")
    built = (_build_info.TORCH_VERSION, _build_info.TORCH_GIT_VERSION)
    have = (torch.__version__, getattr(torch.version, "git_version", ""))
    if built != have:
        raise ImportError(
            f"stagescope_torch was built against torch {built[0]} (git {built[1][:12]}) but "
            f"{sys.executable} imports torch {have[0]} (git {have[1][:12]}) from "
            f"{os.path.dirname(torch.__file__)}: build it for this Python with "
            f"scripts/build-capture-for.sh {sys.executable}")


_check_torch_build()
from . import _C  # noqa: E402  (needs torch.distributed's c10d types registered first)

BACKEND = "stagescope"
LEVELS = ("off", "meta", "stats", "full")

__all__ = ["BACKEND", "configure", "step", "record_gradients", "record_loss", "name_group",
           "declare_layout", "finish", "level"]


def configure(run=None, level=None, run_id=None, hang_timeout=None, inner=None):
    """Where to record (`run`: the run file; rank N writes `<run>.rank<N>.shard`), how much
    (`level`: off | meta | stats | full) and after how many seconds a pending operation counts
    as stuck (`hang_timeout`; default: each group's own timeout): then the rank's shard gets
    what it waits on at once, so a job killed while hanging still leaves the wait-for graph.
    `inner` is the backend that does the communication: "gloo" (default, CPU tensors) or
    "nccl" (CUDA tensors; needs a GPU).  Unset arguments come from STAGESCOPE_RUN,
    STAGESCOPE_LEVEL (default stats), STAGESCOPE_HANG_TIMEOUT and STAGESCOPE_INNER.  Call
    before init_process_group."""
    _select_inner(inner if inner is not None else os.environ.get("STAGESCOPE_INNER", "gloo"))
    run = run if run is not None else os.environ.get("STAGESCOPE_RUN", "")
    level = level if level is not None else os.environ.get("STAGESCOPE_LEVEL", "stats")
    if hang_timeout is None:
        hang_timeout = os.environ.get("STAGESCOPE_HANG_TIMEOUT", "")
    if not run:
        raise ValueError("stagescope_torch.configure: no run file (pass run= or set STAGESCOPE_RUN)")
    if level not in LEVELS:
        raise ValueError(f"stagescope_torch.configure: level={level!r}, expected one of {LEVELS}")
    _C.configure(str(run), level, run_id or os.environ.get("STAGESCOPE_RUN_ID", ""),
                 str(hang_timeout))


def step(iteration):
    """Marks the start of `iteration` (>= 0): ops posted from now on belong to it."""
    _C.step(int(iteration))


def level():
    """The recording level in effect ("off" until the default group exists)."""
    return _C.level()


def shape_preambles(enabled=True):
    """Whether the job sends each P2P tensor's shape before the tensor on the same channel, as
    Megatron-Core does (variable sequence lengths, its bridges): then a 1-D int64 message of at
    most 8 elements is recorded as the shape message of the payload that follows it (same
    iteration and microbatch, edge `<edge>#shape`) and does not count as a message of the
    channel, so microbatch numbers stay microbatch numbers.  Off by default: a job's own small
    int64 tensors stay payloads.  Call before the first P2P operation."""
    _C.set_shape_preambles(bool(enabled))


def _backend_of(group):
    group = group if group is not None else dist.group.WORLD
    backend = group._get_backend(torch.device("cpu"))
    if not isinstance(backend, _C.RecordingBackend):
        raise TypeError(f"group {group} does not use the stagescope backend (got {type(backend).__name__})")
    return backend


def name_group(group, name):
    """Names `group` in the run file ("pp" -> edges "pp:stage0->stage1").  Same name on every
    member.  new_group(..., group_desc=name) does the same without this call."""
    _backend_of(group).name = str(name)


def declare_layout(config_text):
    """Declares the job's layout as a stagescope config (TOML: microbatches,
    micro_batch_size and one [[modules]] table per module with its tp/cp/pp/dp and rank
    offset, docs/config.md).  The run file then describes the job by that layout (its modules,
    each rank's module and grid coordinates, run.microbatches) and `stagescope check` judges
    the job's messages against stagescope's plan of it (plan_order), as the viewer's plan
    overlay shows.  Call on every rank after init_process_group, with the same text.  A text
    that is not a valid config for this world raises ValueError naming why.
    stagescope_torch.megatron.declare_layout writes it from Megatron-Core's HyperCommGrids."""
    _C.declare_layout(str(config_text))


def record_gradients(module, prefix="", phase="reduced", microbatch=-1):
    """Records every parameter gradient of `module` (name, shape, norm, checksum; payload at
    full) for the current iteration.  Call after backward (and after the data-parallel
    reduction for phase="reduced")."""
    for name, p in module.named_parameters():
        if p.grad is not None:
            _C.record_gradient(prefix + name, p.grad, phase, "", int(microbatch))


def record_loss(value, microbatch=-1, dp=0):
    """Records one loss of the current iteration as the job's last stage computed it
    (`microbatch` -1: the iteration's mean; `dp`: the replica), so `compare` and the viewer's
    plots have the job's losses.  `value` is a float or a one-element tensor."""
    if hasattr(value, "item"):
        value = value.detach().float().item()
    _C.record_loss(float(value), int(microbatch), int(dp))


def finish(status="completed", reason=""):
    """Closes this rank's shard (rank 0 also marks the run's status).  Runs automatically at
    interpreter exit; call it explicitly when the process ends by other means."""
    _C.finish(status, reason)


INNERS = ("gloo", "nccl")
_inner = "gloo"


def _select_inner(name):
    """Chooses the inner backend; NCCL needs CUDA and a torch built with NCCL: otherwise one
    line says so (nothing is recorded through a backend that cannot run)."""
    global _inner
    if name not in INNERS:
        raise ValueError(f"stagescope_torch: inner={name!r} (STAGESCOPE_INNER), expected one of {INNERS}")
    if name == "nccl":
        if not dist.is_nccl_available():
            raise RuntimeError("stagescope_torch: inner='nccl' needs a torch built with NCCL; "
                               "this one has none (use inner='gloo')")
        if not torch.cuda.is_available():
            raise RuntimeError("stagescope_torch: inner='nccl' needs a CUDA device, but "
                               "torch.cuda.is_available() is False on this host (use inner='gloo')")
    _inner = name
    # The groups' tensors live on the inner backend's device: c10d routes them by device.
    dist.Backend.backend_capability[BACKEND] = ["cuda"] if name == "nccl" else ["cpu"]


def _inner_backend(opts):
    """Exactly what init_process_group(backend=<inner>) would build for this group."""
    if _inner == "nccl":
        from torch.distributed import ProcessGroupNCCL
        o = ProcessGroupNCCL.Options()
        o._timeout = opts.timeout
        o.global_ranks_in_group = list(opts.global_ranks_in_group)
        o.group_name = opts.group_id
        inner = ProcessGroupNCCL(opts.store, opts.group_rank, opts.group_size, o)
    else:
        inner = ProcessGroupGloo(opts.store, opts.group_rank, opts.group_size, opts.timeout)
        inner.options.global_ranks_in_group = list(opts.global_ranks_in_group)
        inner.options.group_name = opts.group_id
    inner._set_sequence_number_for_group()
    return inner


def _create_backend(opts, backend_options):
    inner = _inner_backend(opts)
    return _C.RecordingBackend(inner, list(opts.global_ranks_in_group), opts.timeout)


_batch_isend_irecv = getattr(dist.batch_isend_irecv, "_stagescope_inner", dist.batch_isend_irecv)


def _recorded_batch_isend_irecv(p2p_op_list):
    """torch.distributed.batch_isend_irecv, its ops recorded as one batch (p2p_batches rows):
    NCCL runs them as one group call, while Gloo, and so the recording backend, receives them
    one by one.  The NCCL replay (docs/nccl-replay.md) needs to know which ops were one call."""
    _C.begin_batch()
    try:
        return _batch_isend_irecv(p2p_op_list)
    finally:
        _C.end_batch()


_recorded_batch_isend_irecv._stagescope_inner = _batch_isend_irecv
dist.batch_isend_irecv = _recorded_batch_isend_irecv
dist.distributed_c10d.batch_isend_irecv = _recorded_batch_isend_irecv

if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["cpu"])
if os.environ.get("STAGESCOPE_INNER", "gloo") != "gloo":
    _select_inner(os.environ["STAGESCOPE_INNER"])  # a job configured by the environment alone

def _raised_line(exc_type, exc, tb):
    """One line for an exception that ended the job: its type, message and innermost frame."""
    import traceback
    where = ""
    frames = traceback.extract_tb(tb) if tb is not None else []
    if frames:
        f = frames[-1]
        where = f" (at {os.path.basename(f.filename)}:{f.lineno} in {f.name})"
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:297] + "..."
    rank = _C.rank() if _C.started() else -1
    return f"rank {rank} raised {exc_type.__name__}: {text}{where}"


_previous_excepthook = None


def _record_raise(exc_type, exc, tb):
    """sys.excepthook while the backend is imported: an exception that ends the job is recorded
    as this rank's end (`rank_failed`, docs/capture.md "How a job ended"), so the run is never
    `completed`; then the previous hook prints the traceback as before."""
    try:
        if _C.started() and not issubclass(exc_type, (SystemExit, KeyboardInterrupt)):
            _C.finish("failed", _raised_line(exc_type, exc, tb))
        elif _C.started() and issubclass(exc_type, KeyboardInterrupt):
            _C.finish("killed", f"rank {_C.rank()} interrupted (KeyboardInterrupt, SIGINT)")
    except Exception:  # noqa: BLE001 - the job's own traceback must still be printed
        pass
    _previous_excepthook(exc_type, exc, tb)


if _previous_excepthook is None:
    import sys as _sys
    _previous_excepthook = _sys.excepthook
    _sys.excepthook = _record_raise

atexit.register(finish)
# multiprocessing children leave through os._exit (no atexit); its finalizers still run.
multiprocessing.util.Finalize(None, finish, exitpriority=0)
