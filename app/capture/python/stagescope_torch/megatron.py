"""Megatron-Core's multimodule pipeline and training path on CPU, its process groups named in the
run file, and its numbers (the data-parallel reduction, the loss scale) recorded as data.

Megatron-Core (0.19) runs its pipeline communication, its DistributedDataParallel and its
optimizers on CUDA and NCCL even when the model is on the CPU.  `enable_cpu()` redirects exactly
the CUDA assumptions on that path, inside Megatron's own modules only (nothing else in the
process sees a change), so its multimodule 1F1B (`MultiModulePipelineCommunicator`,
`BridgeCommunicator`, `P2PCommunicator`, `forward_backward_pipelining_without_interleaving`),
`DistributedDataParallel` (with or without `overlap_grad_reduce`), `finalize_model_grads` and
the optimizers with a grad scaler (`Float16OptimizerWithFloat16Params`, `MimoOptimizer`) run
unchanged on Gloo or on the `stagescope` backend.  Nothing is patched until it is called.

    import stagescope_torch.megatron as ssm
    ssm.enable_cpu()                 # before the communicators are built
    ...                              # HyperCommGrids, MultiModulePipelineCommunicator, ...
    ssm.name_groups(grids, communicator)   # optional: "vision_pp", "bridge:vision->llm", ...
    ssm.record_shape_preambles()     # Megatron's shape messages are recorded as such
    ssm.declare_layout(grids, topology, num_microbatches=m)  # `check` judges it by the plan
    config.finalize_model_grads_func = ssm.audited_finalize(finalize, {"vision": vision_ddp},
                                                            num_microbatches=m)
    ssm.audited_step(mimo_optimizer)  # instead of mimo_optimizer.step()

`audited_finalize` records each module's gradients before and after the data-parallel
reduction with its loss normalisation; `audited_step` each module's loss scale, found-inf and
skip: `stagescope check` then audits the reduction (docs/schedule.md §7.1, per-token losses) and
requires one loss scale for the whole model, naming the cause (docs/capture.md).

`record_shape_preambles()` (stagescope_torch.shape_preambles): Megatron sends an int64 [ndim]
tensor before every payload on the same channel; recorded as the payload's shape message, it
no longer shifts the microbatch numbers (a hang then reads "the shape of the activation of
microbatch 2", not "the activation of microbatch 5").

`enable_cpu()` patches (each a module attribute under megatron.core, except the one class
attribute of 8; all undone by `disable_cpu()`):

1. `bridge_communicator.dist`: `new_group(..., backend='nccl')` (the bridge group) and
   `new_subgroups_by_enumeration(..., backend='nccl')` (the boundary broadcast groups) create
   their groups with the default group's backend instead ("ProcessGroupNCCL is only supported
   with GPUs" otherwise).
2. `schedules.torch`: tensors allocated with `device="cuda"` (`total_num_tokens`) are
   allocated on the CPU.
3. `p2p_communication.torch` and `bridge_communicator.torch`: `torch.cuda.current_device()`
   (the device of every receive buffer and shape message, ~25 calls) is the CPU.
4. the same modules: `torch.cuda.synchronize()` (after the P2P shape exchange and the
   batched P2P) is a no-op: Gloo's `wait()` already returned with the bytes in place.
5. `distributed.param_and_grad_buffer.torch`, `distributed.distributed_data_parallel.torch`:
   DDP's parameter and gradient buffers (`_ParamAndGradBuffer`, allocated on
   `torch.cuda.current_device()`) are on the CPU; with `overlap_grad_reduce`,
   `torch.cuda.current_stream()`, `torch.cuda.Stream` and `torch.cuda.stream()` are host
   streams whose waits are no-ops (the host thread already orders the work).
6. `distributed.finalize_model_grads.torch`: the same view of torch.cuda (the reduction itself
   is c10d's and needs nothing).
7. `optimizer.optimizer.torch`, `optimizer.grad_scaler.torch`, `optimizer.clip_grads.torch`,
   `models.mimo.optimizer.torch`: the found-inf flags, the grad scaler's scale and the norms are
   allocated on the CPU (`device='cuda'` otherwise); `optimizer.clip_grads.l2_norm_impl` (the
   multi-tensor L2 norm, whose fallback puts its result on CUDA) computes on the CPU.
8. `optimizer.optimizer.Float16OptimizerWithFloat16Params.__init__` (a class attribute): the
   constructor accepts only parameters whose `type()` is a CUDA type name; during the call CPU
   parameters answer with the CUDA name of their dtype (their class is restored after).

Import needs `triton` (torch's pinned version: megatron.core imports it unconditionally) and
`setuptools<82`; scripts/megatron-env.sh installs both.
"""

import contextlib
import types

import torch
import torch.distributed as dist

__all__ = ["enable_cpu", "disable_cpu", "cpu_patches", "name_groups", "group_names",
           "record_shape_preambles", "declare_layout", "layout_config", "topology_sink",
           "record_losses", "record_roles", "audited_finalize", "audited_step"]

_FACTORIES = ("empty", "zeros", "ones", "full", "tensor", "arange", "rand", "randn", "empty_like",
              "zeros_like", "ones_like", "full_like")
_saved = {}  # (module, attribute) -> the original value, while enabled


def _on_cpu(device):
    return device is not None and str(device).startswith("cuda")


class _HostStream:
    """A CUDA stream as the patched modules see one on the CPU: work is ordered by the host
    thread already, so waiting on another stream or an event is a no-op."""

    def __init__(self, *args, **kwargs):
        pass

    def wait_stream(self, other):
        return None

    def wait_event(self, event):
        return None

    def synchronize(self):
        return None


class _CpuCuda:
    """`torch.cuda` as the patched modules see it: the current device is the CPU, synchronize()
    does nothing, streams are host streams (_HostStream) and `torch.cuda.stream(s)` enters
    nothing; everything else is torch.cuda's."""

    Stream = _HostStream

    def current_device(self):
        return "cpu"

    def synchronize(self, device=None):
        return None

    def current_stream(self, device=None):
        return _HostStream()

    def stream(self, stream):
        return contextlib.nullcontext()

    def __getattr__(self, name):
        return getattr(torch.cuda, name)


class _CpuTorch:
    """`torch` as the patched modules see it: factory calls with a CUDA device allocate on the
    CPU, and `torch.cuda` is `_CpuCuda`.  Every other attribute is torch's own."""

    cuda = _CpuCuda()

    def __getattr__(self, name):
        attr = getattr(torch, name)
        if name in _FACTORIES:
            def factory(*args, **kwargs):
                if _on_cpu(kwargs.get("device")):
                    kwargs["device"] = "cpu"
                return attr(*args, **kwargs)
            factory.__name__ = name
            return factory
        return attr


class _DefaultBackendDist:
    """`torch.distributed` as bridge_communicator sees it: groups asked for with backend
    'nccl' use the default group's backend."""

    def new_group(self, *args, **kwargs):
        if kwargs.get("backend") == "nccl":
            kwargs["backend"] = None
        return dist.new_group(*args, **kwargs)

    def new_subgroups_by_enumeration(self, *args, **kwargs):
        if kwargs.get("backend") == "nccl":
            kwargs["backend"] = None
        return dist.new_subgroups_by_enumeration(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(dist, name)


def _presenting_cuda_types(init):
    """Float16OptimizerWithFloat16Params.__init__ for CPU parameters: the constructor sorts the
    parameters by `param.type()`, accepting only the CUDA names ('torch.cuda.HalfTensor',
    'torch.cuda.BFloat16Tensor', 'torch.cuda.FloatTensor') and raising a TypeError for any other.
    For the duration of the call each CPU parameter answers type() with the CUDA name of its
    dtype (its class is swapped for a subclass that does, and restored afterwards); nothing else
    about the parameters or the constructor changes."""

    def __init__(self, optimizer, *args, **kwargs):
        params = [p for g in (optimizer.param_groups if optimizer else []) for p in g["params"]]
        swapped = [(p, type(p)) for p in params if not p.is_cuda]
        for p, cls in swapped:
            p.__class__ = _cuda_typed(cls)
        try:
            init(self, optimizer, *args, **kwargs)
        finally:
            for p, cls in swapped:
                p.__class__ = cls

    __init__.__wrapped__ = init
    return __init__


_CUDA_TYPE = {torch.float16: "torch.cuda.HalfTensor", torch.bfloat16: "torch.cuda.BFloat16Tensor",
              torch.float32: "torch.cuda.FloatTensor"}
_cuda_typed_classes = {}


def _cuda_typed(cls):
    """A subclass of parameter class `cls` whose type() (no arguments) names the CUDA type."""
    if cls not in _cuda_typed_classes:
        def type_(self, *args, **kwargs):
            if args or kwargs:
                return cls.type(self, *args, **kwargs)
            return _CUDA_TYPE.get(self.dtype) or cls.type(self)
        _cuda_typed_classes[cls] = type(cls.__name__, (cls,), {"type": type_})
    return _cuda_typed_classes[cls]


def _host_l2_norm(chunk_size, noop_flag, tensor_lists, per_tensor, *args):
    """clip_grads' multi-tensor L2 norm (signature of amp_C.multi_tensor_l2norm; Megatron's own
    fallback, megatron.core.utils.local_multi_tensor_l2_norm, puts its result on CUDA): the norm
    over every tensor of the lists, as a float32 [1] tensor on the CPU."""
    norms = [torch.norm(t.float()) for tensors in tensor_lists for t in tensors]
    total = torch.norm(torch.stack(norms)) if norms else torch.zeros([])
    return total.reshape(1).float(), None


def cpu_patches():
    """The (owner, attribute, replacement) triples enable_cpu() applies, in order; the owner is a
    module, or (the float16 optimizer's constructor) a class."""
    from importlib import import_module

    # by module path: megatron.core.distributed re-exports a function finalize_model_grads
    (bridge_communicator, p2p_communication, schedules, param_and_grad_buffer,
     distributed_data_parallel, finalize_model_grads, megatron_optimizer, grad_scaler, clip_grads,
     mimo_optimizer) = (import_module("megatron.core." + m) for m in (
        "pipeline_parallel.bridge_communicator", "pipeline_parallel.p2p_communication",
        "pipeline_parallel.schedules", "distributed.param_and_grad_buffer",
        "distributed.distributed_data_parallel", "distributed.finalize_model_grads",
        "optimizer.optimizer", "optimizer.grad_scaler", "optimizer.clip_grads",
        "models.mimo.optimizer"))
    cpu_torch = _CpuTorch()
    float16 = megatron_optimizer.Float16OptimizerWithFloat16Params
    return [(bridge_communicator, "dist", _DefaultBackendDist()),
            (schedules, "torch", cpu_torch),
            (p2p_communication, "torch", cpu_torch),
            (bridge_communicator, "torch", cpu_torch),
            # the real training path: DDP's buffers and streams, finalize_model_grads, the
            # optimizers with a grad scaler
            (param_and_grad_buffer, "torch", cpu_torch),
            (distributed_data_parallel, "torch", cpu_torch),
            (finalize_model_grads, "torch", cpu_torch),
            (megatron_optimizer, "torch", cpu_torch),
            (grad_scaler, "torch", cpu_torch),
            (clip_grads, "torch", cpu_torch),
            (clip_grads, "l2_norm_impl", _host_l2_norm),
            (mimo_optimizer, "torch", cpu_torch),
            (float16, "__init__", _presenting_cuda_types(float16.__dict__["__init__"]))]


def _owner_name(owner):
    """"megatron.core.x.y" for a module, "megatron.core.x.y.Class" for a class."""
    if isinstance(owner, types.ModuleType):
        return owner.__name__
    return f"{owner.__module__}.{owner.__qualname__}"


def enable_cpu():
    """Applies the CPU redirections of the module docstring (idempotent).  Call before
    MultiModulePipelineCommunicator / BridgeCommunicator, Megatron's DistributedDataParallel and
    the optimizers are built (the bridge and boundary groups, the gradient buffers and the
    optimizers' state tensors are created in their constructors).  Returns the list of patched
    "module.attribute" names."""
    done = []
    for owner, attr, replacement in cpu_patches():
        key = (_owner_name(owner), attr)
        if key not in _saved:
            _saved[key] = (owner, owner.__dict__[attr])
            setattr(owner, attr, replacement)
        done.append(f"{key[0]}.{attr}")
    return done


def disable_cpu():
    """Restores every attribute enable_cpu() replaced."""
    for (_, attr), (owner, original) in list(_saved.items()):
        setattr(owner, attr, original)
    _saved.clear()


# ---- process group names ---------------------------------------------------------------------

def _is_member(group):
    """True when this rank belongs to `group` (Megatron keeps None or NON_GROUP_MEMBER for a
    group the rank is not in; naming such a group is refused by c10d)."""
    if group is None or isinstance(group, int):  # NON_GROUP_MEMBER is the int -100
        return False
    try:
        return dist.get_rank(group) >= 0
    except (RuntimeError, ValueError, AttributeError, TypeError):
        return False


def group_names(module_to_grid_map, communicator=None):
    """The names name_groups() gives, as (group, name) pairs for the groups this rank is a member
    of: each grid's groups "<module>_<dims>" (e.g. "vision_pp", "llm_tp", "llm_dp"), each bridge
    group "bridge:<src>-><dest>", each boundary broadcast group "boundary:<module>:last" (the
    source module's last stage) or "boundary:<module>:first" (the destination's first stage)."""
    named = []
    seen = set()

    def add(group, name):
        if _is_member(group) and id(group) not in seen:
            seen.add(id(group))
            named.append((group, name))

    for module, grid in module_to_grid_map.items():
        for key, group in getattr(grid, "_pgs", {}).items():
            dims = key if isinstance(key, str) else "-".join(key[1])
            add(group, f"{module}_{dims}")
    for bridge in getattr(communicator, "bridge_comms", []) if communicator is not None else []:
        add(bridge.bridge_pg, f"bridge:{bridge.src_module_name}->{bridge.dest_module_name}")
        add(bridge.src_grid_broadcast_pg, f"boundary:{bridge.src_module_name}:last")
        add(bridge.dest_grid_broadcast_pg, f"boundary:{bridge.dest_module_name}:first")
    return named


def name_groups(module_to_grid_map, communicator=None):
    """Names, in the run file, every process group of the job's HyperCommGrids and of the
    communicator's bridges that this rank is a member of (names: group_names()).  Every rank
    calls it with the same arguments; each names only its own groups, so the same group gets
    the same name on all its members.  Groups not on the stagescope backend are left alone.
    Returns the names given on this rank."""
    from . import name_group
    given = []
    for group, name in group_names(module_to_grid_map, communicator):
        try:
            name_group(group, name)
        except TypeError:  # the job runs on another backend: nothing to name
            continue
        given.append(name)
    return given


def record_shape_preambles(enabled=True):
    """Records Megatron's shape messages as the shape messages of the payloads they precede
    (stagescope_torch.shape_preambles).  Needs the stagescope backend's module imported."""
    import stagescope_torch

    stagescope_torch.shape_preambles(enabled)


# ---- the numbers: the data-parallel reduction and the loss scale, recorded as data ----------

def _grad_of(param):
    """The gradient Megatron's DDP accumulates and reduces (`main_grad`), else `.grad`."""
    grad = getattr(param, "main_grad", None)
    return grad if grad is not None else param.grad


def _coordinate(module, group_attr):
    """This rank's index in a Megatron DDP's `dp_group` / `pp_group` / `tp_group` (0 without)."""
    group = getattr(module, group_attr, None)
    try:
        return int(group.rank()) if group is not None else 0
    except (AttributeError, RuntimeError):
        return 0


def _normalisation(module):
    """'per_token' when the module's own config reduces a per-token loss (its DDP sums over its
    dp group and finalize divides by the global token count), else 'mean' (its DDP averages)."""
    config = getattr(module, "config", None)
    return "per_token" if getattr(config, "calculate_per_token_loss", False) else "mean"


def _recording():
    import stagescope_torch
    return stagescope_torch._C.started() and stagescope_torch.level() != "off"


def _record_grads(name, module, replicas, phase, microbatch, params=None):
    """Records `params` ((name, parameter) pairs; default: all of `module`'s) of module `name`."""
    import stagescope_torch
    tp, pp = _coordinate(module, "tp_group"), _coordinate(module, "pp_group")
    dp = replicas.get(name, _coordinate(module, "dp_group"))
    for pname, p in params if params is not None else module.named_parameters():
        grad = _grad_of(p)
        if grad is not None:
            stagescope_torch._C.record_gradient(f"{name}.pp{pp}.{pname.removeprefix('module.')}",
                                                grad.detach(), phase, name, int(microbatch),
                                                tp, pp, int(dp))


def _watch_grad_syncs(name, module, replicas, microbatch):
    """Megatron DDP reduces each bucket group in its start_grad_sync(): from finalize without
    overlap_grad_reduce, from the last microbatch's backward hook with it (then the gradients
    are scaled and reduced in place before finalize runs).  Each of the module's bucket groups
    gets a recording start_grad_sync (an instance attribute of the job's DDP object) that
    records the group's gradients before they are scaled and reduced.  False when `module` has
    no bucket groups (not a Megatron DDP): then finalize's entry is the moment before."""
    groups = [g for attr in ("bucket_groups", "expert_parallel_bucket_groups")
              for g in (getattr(module, attr, None) or [])]
    if not groups:
        return False
    names = {id(p): n for n, p in module.named_parameters()}
    for group in groups:
        def start_grad_sync(*args, _start=group.start_grad_sync, _group=group, **kwargs):
            if _recording():
                params = [(names[id(p)], p) for b in _group.buckets for p in b.params_list
                          if id(p) in names]
                _record_grads(name, module, replicas, "accumulated", microbatch, params)
            return _start(*args, **kwargs)
        group.start_grad_sync = start_grad_sync
    return True


def audited_finalize(finalize, modules, language_model="llm", num_microbatches=-1,
                     replicas=None):
    """Wraps the job's finalize_model_grads_func (Megatron's finalize_model_grads or the job's own
    multimodule finalizer; same signature) so that each call records, per module of this rank
    (`modules`: {name: the module's Megatron DDP}):

    - every parameter's gradient before the reduction (phase "accumulated", microbatch = the last
      one: this replica's own sum over the iteration's microbatches; a Megatron DDP's taken in
      each bucket group's start_grad_sync, which with overlap_grad_reduce runs in the backward,
      before finalize) and after the call (phase "reduced"):
      `main_grad` where DDP keeps one, else `.grad`, named "<module>.pp<stage>.<parameter>" with
      the rank's tp/pp/dp coordinates (from the DDP's groups; `replicas` {name: dp index}
      overrides dp);
    - a `module_steps` row: the module's loss normalisation (its own config's
      calculate_per_token_loss), `num_microbatches`, and on the language model's ranks the token
      count the schedule passed (this replica's) and after the call (the global one finalize
      divides by).

    `stagescope check` then judges each module's reduced gradient against the sum over its
    replicas divided by what the language model's loss implies (docs/schedule.md §7.1) and names
    the cause of a difference (core/analysis/GradientAudit.h).  Use:

        config.finalize_model_grads_func = ssm.audited_finalize(
            finalize_model_grads, {"vision": vision_ddp}, language_model="language",
            num_microbatches=M)

    Off the stagescope backend (or at level off) the wrapper only calls `finalize`."""
    import stagescope_torch

    replicas = dict(replicas or {})
    last = num_microbatches - 1 if num_microbatches > 0 else -1
    watched = {name for name, module in modules.items()
               if _watch_grad_syncs(name, module, replicas, last)}

    def audited(model, num_tokens, *args, **kwargs):
        if not _recording():
            return finalize(model, num_tokens, *args, **kwargs)
        local_tokens = int(num_tokens) if num_tokens is not None else -1
        for name, module in modules.items():
            if name not in watched:
                _record_grads(name, module, replicas, "accumulated", last)
        result = finalize(model, num_tokens, *args, **kwargs)
        for name, module in modules.items():
            _record_grads(name, module, replicas, "reduced", -1)
        for name, module in modules.items():
            lm = name == language_model and num_tokens is not None
            stagescope_torch._C.record_module_step(
                name, dp=int(replicas.get(name, _coordinate(module, "dp_group"))),
                normalisation=_normalisation(module), microbatches=int(num_microbatches),
                tokens=local_tokens if lm and local_tokens > 0 else -1,
                global_tokens=int(num_tokens) if lm else -1)
        return result

    audited.__wrapped__ = finalize
    return audited


def _grad_scalers(optimizer):
    """The inner optimizers of a (Chained) Megatron optimizer that hold a grad scaler."""
    inner = getattr(optimizer, "chained_optimizers", None) or [optimizer]
    return [o for o in inner if getattr(o, "grad_scaler", None) is not None]


def _scale(optimizer):
    try:
        return float(optimizer.get_loss_scale())
    except (AttributeError, TypeError, RuntimeError):
        return float("nan")


def audited_step(optimizer, module=None, replicas=None):
    """Runs `optimizer.step()` and records, per module, the loss scale its backward ran with,
    the scale after the step's scaler update, whether its own check found Inf/NaN (what its
    prepare_grads() returned) and whether the step was skipped (`module_steps` rows).
    `optimizer` is megatron-core's MimoOptimizer (one inner optimizer and scaler per module
    grid: modules named by its module_infos) or any Megatron optimizer of one module (named by
    `module`).  Returns what step() returned.

    `stagescope check` requires one loss scale for the whole model in every iteration, names the
    module and iteration where the scales part, and reports a step skipped for an overflow as
    such, not as a non-finite failure (core/analysis/LossScale.h)."""
    import stagescope_torch

    if not _recording():
        return optimizer.step()
    infos = getattr(optimizer, "module_infos", None)
    if infos is not None:
        inner = {n: i.optimizer for n, i in infos.items() if i.is_active and i.optimizer}
    else:
        if not module:
            raise ValueError("audited_step: name the module of a single-module optimizer "
                             "(module=...)")
        inner = {module: optimizer}
    before = {n: _scale(o) for n, o in inner.items()}
    found = {}

    def watch(name, opt):
        prepare = opt.prepare_grads  # the bound method; the instance attribute shadows it

        def prepare_grads(*args, **kwargs):
            result = prepare(*args, **kwargs)
            found[name] = bool(result)
            return result
        opt.prepare_grads = prepare_grads

    for name, opt in inner.items():
        watch(name, opt)
    try:
        result = optimizer.step()
    finally:
        for opt in inner.values():
            opt.__dict__.pop("prepare_grads", None)
    success = bool(result[0] if isinstance(result, tuple) else result)
    for name, opt in inner.items():
        stagescope_torch._C.record_module_step(
            name, dp=int((replicas or {}).get(name, -1)), loss_scale=before[name],
            loss_scale_after=_scale(opt), found_inf=int(found[name]) if name in found else -1,
            skipped=0 if success else 1)
    return result


# ---- the layout, declared in the run file ---------------------------------------------------

def _dims(grid):
    """{dim name: size} of a HyperCommGrid (its dims beyond tp, cp, pp, dp must be 1)."""
    dims = dict(zip(grid.dim_names, grid.shape))
    extra = {d: n for d, n in dims.items() if d not in ("tp", "cp", "pp", "dp") and n != 1}
    if extra:
        raise ValueError(f"declare_layout: grid dims {extra} are not modelled by stagescope's plan "
                         "(tp, cp, pp, dp only)")
    return {d: int(dims.get(d, 1)) for d in ("tp", "cp", "pp", "dp")}


def _job_schedule(module_to_grid_map, topology, num_microbatches):
    """Megatron's own view of every rank's place in the pipeline, computed by Megatron's
    MultiModulePipelineCommunicator.compute_total_pipeline_stages (what its 1F1B schedule uses:
    warmup = min(total - current_stage - 1, microbatches)): [(rank, module, stage, global stage,
    total stages, warmup)]."""
    from megatron.core.pipeline_parallel.multimodule_communicator import \
        MultiModulePipelineCommunicator as Comm

    total = Comm.compute_total_pipeline_stages(topology, module_to_grid_map)
    rows = []
    for module, grid in module_to_grid_map.items():
        for group in grid._gen_rank_enum(["pp"]):
            for stage, rank in enumerate(group):
                current = Comm.compute_total_pipeline_stages(
                    topology, module_to_grid_map, rank=rank, module_name=module) - 1
                warmup = min(total - current - 1, num_microbatches)
                rows.append((rank, module, stage, current, total, warmup))
    return sorted(rows)


def topology_sink(module_to_grid_map, topology):
    """The module every other one feeds: the one grid whose topology entry lists no consumer
    (Megatron's MIMO calls it "language"; any name works).  None when there is not exactly one."""
    sinks = [m for m in module_to_grid_map if not list(topology.get(m, []))]
    return sinks[0] if len(sinks) == 1 else None


def layout_config(module_to_grid_map, topology, num_microbatches, micro_batch_size=1,
                  language_model=None):
    """The job's layout as stagescope config text: one [[modules]] table per grid (tp, cp, pp, dp
    and the rank offset from the HyperCommGrid; every module but `language_model` an encoder),
    preceded by one "# job schedule:" line per rank with Megatron's own stage and warmup.
    `language_model` defaults to the topology's sink (topology_sink).  stagescope's plan models
    encoders feeding one language model: another topology is refused with a ValueError naming
    it."""
    if language_model is None:
        language_model = topology_sink(module_to_grid_map, topology)
        if language_model is None:
            raise ValueError(f"declare_layout: the topology {dict(topology)!r} has no single module "
                             "that feeds no other (the language model); pass language_model=")
    if language_model not in module_to_grid_map:
        raise ValueError(f"declare_layout: language_model {language_model!r} is not one of the "
                         f"grids {sorted(module_to_grid_map)}")
    for module in module_to_grid_map:
        want = [] if module == language_model else [language_model]
        if list(topology.get(module, [])) != want:
            raise ValueError(f"declare_layout: topology[{module!r}] is {topology.get(module)!r}; "
                             f"stagescope's plan models every encoder feeding {language_model!r} "
                             f"(expected {want!r})")
    lines = [f"# job schedule: rank={r} module={m} stage={s} global_stage={g} total_stages={t} "
             f"warmup={w}" for r, m, s, g, t, w in _job_schedule(module_to_grid_map, topology,
                                                                 num_microbatches)]
    lines += ["# layout declared by stagescope_torch.megatron.declare_layout (HyperCommGrids)",
              f"microbatches = {int(num_microbatches)}",
              f"micro_batch_size = {int(micro_batch_size)}"]
    encoders = [m for m in module_to_grid_map if m != language_model]
    for module in encoders + [language_model]:
        grid, dims = module_to_grid_map[module], _dims(module_to_grid_map[module])
        lines += ["", "[[modules]]", f'name = "{module}"',
                  f'kind = "{"llm" if module == language_model else "encoder"}"']
        lines += [f"{d} = {dims[d]}" for d in ("tp", "cp", "pp", "dp")]
        lines += [f"offset = {int(grid.rank_offset)}", f"layers = {dims['pp']}"]
    return "\n".join(lines) + "\n"


def declare_layout(module_to_grid_map, topology, num_microbatches, micro_batch_size=1,
                   language_model=None):
    """Writes the job's layout (layout_config) into the run file, so `stagescope check` judges the
    captured schedule against stagescope's plan of that layout and names the cause of a
    deviation or a hang.  Every rank may call it (after init_process_group, with the same
    arguments); rank 0 writes it.  Returns the text."""
    import stagescope_torch

    text = layout_config(module_to_grid_map, topology, num_microbatches, micro_batch_size,
                         language_model)
    stagescope_torch._C.declare_layout(text)
    record_roles()
    return text


# ---- losses ---------------------------------------------------------------------------------

def record_losses(losses_reduced, key=None, dp=0):
    """Records the losses forward_backward_func returned on the pipeline's last stage (one entry
    per microbatch: a tensor, a float, or a dict of them; `key` picks the dict's entry, default
    its first) and their mean as the iteration's loss.  Other ranks get an empty list: nothing is
    recorded.  Returns the recorded values."""
    import stagescope_torch

    values = []
    for entry in losses_reduced or []:
        if isinstance(entry, dict):
            entry = entry[key] if key is not None else next(iter(entry.values()))
        if isinstance(entry, (tuple, list)):  # (loss_sum, num_tokens) of a per-token loss
            entry = entry[0] / entry[1] if len(entry) == 2 else entry[0]
        values.append(float(entry.detach().float().mean().item()) if hasattr(entry, "detach")
                      else float(entry))
    for mb, v in enumerate(values):
        stagescope_torch.record_loss(v, microbatch=mb, dp=dp)
    if values:
        stagescope_torch.record_loss(sum(values) / len(values), microbatch=-1, dp=dp)
    return values


# ---- message roles --------------------------------------------------------------------------

# What each tensor argument of Megatron's P2P helpers (`_batched_p2p_ops`, `_p2p_ops` in
# p2p_communication; keyword-only) means: (carries, the peer is the next stage).
_P2P_ROLES = {"tensor_send_prev": ("gradient", False), "tensor_recv_prev": ("activation", False),
              "tensor_send_next": ("activation", True), "tensor_recv_next": ("gradient", True)}
_P2P_CALLS = ("send_forward", "recv_forward", "send_backward", "recv_backward",
              "send_forward_recv_backward", "send_backward_recv_forward",
              "send_forward_recv_forward", "send_backward_recv_backward",
              "send_forward_backward_recv_forward_backward")
_roles_saved = {}


def _calling_method():
    """The P2PCommunicator method on the stack (the public call that posted the messages)."""
    import sys
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name in _P2P_CALLS:
            return frame.f_code.co_name
        frame = frame.f_back
    return "_communicate"


def _with_roles(original):
    def ops(**kwargs):
        import stagescope_torch
        call = _calling_method()
        for name, (carries, peer_is_next) in _P2P_ROLES.items():
            tensor = kwargs.get(name)
            if tensor is not None:
                stagescope_torch._C.expect_role(tensor.data_ptr(), carries, peer_is_next, call)
        try:
            return original(**kwargs)
        finally:
            stagescope_torch._C.clear_roles()
    ops.__wrapped__ = original
    return ops


def record_roles(enabled=True):
    """Records what each of Megatron's pipeline messages means — activation or gradient, to or
    from the next or the previous stage, and the P2PCommunicator call that posted it — beside
    its transfer row (`message_roles`, docs/capture.md "Message roles"), so `check` can require
    both sides of every message to mean the same tensor (a crossed exchange passes every shape
    and checksum test).  Wraps p2p_communication's `_batched_p2p_ops` and `_p2p_ops` (the
    helpers every P2P call goes through); `record_roles(False)` restores them.  Called by
    declare_layout()."""
    from megatron.core.pipeline_parallel import p2p_communication as p2p
    for attr in ("_batched_p2p_ops", "_p2p_ops"):
        if enabled and attr not in _roles_saved:
            _roles_saved[attr] = getattr(p2p, attr)
            setattr(p2p, attr, _with_roles(_roles_saved[attr]))
        elif not enabled and attr in _roles_saved:
            setattr(p2p, attr, _roles_saved.pop(attr))
