"""Megatron-Core's multimodule pipeline on CPU, and its process groups named in the run file.

Megatron-Core (0.19) runs its pipeline communication on CUDA and NCCL even when the model is on
the CPU.  `enable_cpu()` redirects exactly the CUDA assumptions on that path, inside Megatron's
own pipeline modules only (nothing else in the process sees a change), so its multimodule 1F1B
(`MultiModulePipelineCommunicator`, `BridgeCommunicator`, `P2PCommunicator`,
`forward_backward_pipelining_without_interleaving`) runs unchanged on Gloo or on the
`stagescope` backend.  Nothing is patched until it is called.

    import stagescope_torch.megatron as ssm
    ssm.enable_cpu()                 # before the communicators are built
    ...                              # HyperCommGrids, MultiModulePipelineCommunicator, ...
    ssm.name_groups(grids, communicator)   # optional: "vision_pp", "bridge:vision->llm", ...
    ssm.record_shape_preambles()     # Megatron's shape messages are recorded as such
    ssm.declare_layout(grids, topology, num_microbatches=m)  # `check` judges it by the plan

`record_shape_preambles()` (stagescope_torch.shape_preambles): Megatron sends an int64 [ndim]
tensor before every payload on the same channel; recorded as the payload's shape message, it
no longer shifts the microbatch numbers (a hang then reads "the shape of the activation of
microbatch 2", not "the activation of microbatch 5").

`enable_cpu()` patches (each one a module attribute of megatron.core.pipeline_parallel.*, undone
by `disable_cpu()`):

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

Import needs `triton` (torch's pinned version: megatron.core imports it unconditionally) and
`setuptools<82`; scripts/megatron-env.sh installs both.
"""

import torch
import torch.distributed as dist

__all__ = ["enable_cpu", "disable_cpu", "cpu_patches", "name_groups", "group_names",
           "record_shape_preambles", "declare_layout", "layout_config", "topology_sink",
           "record_losses", "record_roles"]

_FACTORIES = ("empty", "zeros", "ones", "full", "tensor", "arange", "rand", "randn", "empty_like",
              "zeros_like", "ones_like", "full_like")
_saved = {}  # (module, attribute) -> the original value, while enabled


def _on_cpu(device):
    return device is not None and str(device).startswith("cuda")


class _CpuCuda:
    """`torch.cuda` as the patched modules see it: the current device is the CPU and
    synchronize() does nothing; everything else is torch.cuda's."""

    def current_device(self):
        return "cpu"

    def synchronize(self, device=None):
        return None

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


def cpu_patches():
    """The (module, attribute, replacement) triples enable_cpu() applies, in order."""
    from megatron.core.pipeline_parallel import bridge_communicator, p2p_communication, schedules
    cpu_torch = _CpuTorch()
    return [(bridge_communicator, "dist", _DefaultBackendDist()),
            (schedules, "torch", cpu_torch),
            (p2p_communication, "torch", cpu_torch),
            (bridge_communicator, "torch", cpu_torch)]


def enable_cpu():
    """Applies the CPU redirections of the module docstring (idempotent).  Call before
    MultiModulePipelineCommunicator / BridgeCommunicator are built (the bridge and boundary
    groups are created in their constructors).  Returns the list of patched
    "module.attribute" names."""
    done = []
    for module, attr, replacement in cpu_patches():
        key = (module.__name__, attr)
        if key not in _saved:
            _saved[key] = (module, getattr(module, attr))
            setattr(module, attr, replacement)
        done.append(f"{module.__name__}.{attr}")
    return done


def disable_cpu():
    """Restores every attribute enable_cpu() replaced."""
    for (_, attr), (module, original) in list(_saved.items()):
        setattr(module, attr, original)
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
