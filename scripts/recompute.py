#!/usr/bin/env python3
"""Independent recomputation of a recorded stagescope run (docs/recompute.md).

Reads a run file recorded at `--record full` and recomputes every iteration in plain PyTorch
from the documentation alone (docs/model.md: the model, the parameter shards, the data layout,
the loss, the data-parallel scaling, the optimizer): it gathers each module's full parameters
from the recorded TP/PP shards, rebuilds the whole model on one process in float64 (no tensor
or pipeline parallelism, one parameter copy per data-parallel replica), feeds the recorded
microbatch inputs and compares with what the ranks recorded:

  * every microbatch loss and the iteration loss: |l - l_ref| <= 1e-6 * max(1, |l_ref|);
  * every recorded gradient shard, per microbatch (`accumulated`) and after the reduction
    (`reduced`), element-wise: max |g - g_ref| <= 1e-5 * max(1, max |g_ref|);
  * every recorded transfer payload (pipeline activations and gradients, bridge pieces,
    local hand-offs), with the same element-wise rule;
  * the optimizer step: the recorded parameters after the step against the configured
    optimizer applied (in float32, as the ranks step) to the recorded parameters before it
    and the recorded reduced gradients
    (max |p - p_ref| <= 2^-21 * max(1, max |p_ref|): the update is ~lr, so this resolves it).

A bfloat16 run is judged on its reduced gradients and losses only, each against a bound scaled
by how far this model computed in bfloat16 from the same parameters lands from the float64
truth (LOW_* below; docs/recompute.md, "bfloat16 runs"); its payloads, per-microbatch gradients
and optimizer step are not judged.

Iteration t starts from the parameters the ranks recorded after step t-1 (the initial ones
for t = 0): each step is judged on its own, so a defect is named in the iteration it happens.
A run recorded with [record] filters is judged on what the filter kept; an iteration whose
parameters or inputs it left out is printed as NOT CHECKED with what is missing, never as a
mismatch (docs/recompute.md, "Record filters").

Prints one verdict line per iteration and a final line.  Exit status: 0 every recorded value
matches; 1 a mismatch (each named: module, parameter or edge, rank, the worst element);
3 the file cannot be recomputed (not level full, a run that did not complete, records missing,
a filter that leaves no iteration to recompute, an unsupported config), with one line saying
why; 2 usage.

Usage: recompute.py RUN.db [--tol-grad X] [--tol-loss X] [--max-report N] [-v]
"""
import argparse
import math
import os
import sqlite3
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE, EXIT_CANNOT = 0, 1, 2, 3
APPLICATION_ID = 0x53544753
TOL_PARAM = 2.0 ** -21
# bfloat16 runs (docs/recompute.md, "bfloat16 runs"): a reduced gradient passes when its relative
# L2 from the float64 recomputation (floor LOW_FLOOR x the model's gradient norm) is at most
# max(LOW_BASE, LOW_FACTOR x d), d = the same for this model computed in bfloat16 from the same
# parameters; a loss when |l - l64| <= max(LOW_LOSS_BASE x max(1, |l64|), LOW_FACTOR x
# |l_bf16 - l64|).  The floor is 10x check's: gradients that are zero in exact arithmetic
# (attention key biases) are pure bfloat16 noise, whose size differs from implementation to
# implementation (seen: 3.3x between the engine and plain PyTorch).
LOW_BASE, LOW_FACTOR, LOW_LOSS_BASE, LOW_FLOOR = 0.2, 3.0, 0.03, 1e-2


class CannotRecompute(Exception):
    """The file does not hold what a recomputation needs; the message says what."""


class NotChecked(Exception):
    """One iteration of a filtered run cannot be recomputed (the filter left out what it
    needs); the message says what."""


# ---- reading the run file ------------------------------------------------------------------

def dims(text):
    return [int(x) for x in text.split(",")] if text else []


DTYPES = {"float32": "float32", "float64": "float64", "int64": "int64", "int32": "int32",
          "bfloat16": "bfloat16"}


def tensor_of(payload, dtype, shape, where):
    """The recorded bytes as a float64 (or int64) tensor of `shape`."""
    if payload is None:
        raise CannotRecompute(f"{where}: no payload (the run was not recorded at level full?)")
    if dtype not in DTYPES:
        raise CannotRecompute(f"{where}: dtype {dtype!r} is not supported (expected one of "
                              f"{', '.join(DTYPES)})")
    t = torch.frombuffer(bytearray(payload), dtype=getattr(torch, DTYPES[dtype]))
    n = math.prod(shape)
    if t.numel() != n:
        raise CannotRecompute(f"{where}: payload holds {t.numel()} {dtype} values, shape "
                              f"{shape} needs {n}")
    t = t.reshape(shape).clone()
    return t.to(torch.float64) if t.is_floating_point() else t


class Run:
    """Everything recompute needs from one run file, read once."""

    def __init__(self, path):
        if not os.path.exists(path):
            raise CannotRecompute(f"{path}: no such file")
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            app = con.execute("PRAGMA application_id").fetchone()[0]
        except sqlite3.DatabaseError as e:
            raise CannotRecompute(f"{path}: not a run file ({e})")
        if app != APPLICATION_ID:
            raise CannotRecompute(f"{path}: not a run file (application_id {app}, expected "
                                  f"{APPLICATION_ID})")
        self.path = path
        self.con = con
        cols = {r[1] for r in con.execute("PRAGMA table_info(run)")}
        # The record filter columns came with format 2; a file without them had no filters.
        filters = [c if c in cols else "''" for c in
                   ("record_iterations", "record_modules", "record_ranks")]
        row = con.execute("SELECT config_text, world_size, iterations, microbatches, level, "
                          "status, " + ", ".join(filters) + " FROM run WHERE id = 1").fetchone()
        if row is None:
            raise CannotRecompute(f"{path}: table run has no row")
        (text, self.world, self.iterations, self.m, level, status, rit, rmod, rrank) = row
        if level != "full":
            raise CannotRecompute(f"{path}: recorded at level {level!r}; recomputation needs "
                                  f"level 'full' (run with --record full)")
        if status != "completed":
            raise CannotRecompute(f"{path}: run status {status!r}; only a completed run is "
                                  f"recomputed")
        # The [record] filter (docs/run-file.md, "Record filters"): a row exists only for an
        # iteration in record_iterations on a rank in record_ranks holding a module in
        # record_modules ('' = no restriction).  What it leaves out is "not checked", never a
        # mismatch.
        def listed(column, text, kind):
            if text is None or text == "":
                return None
            try:
                if not isinstance(text, str):
                    raise ValueError
                return {kind(x) for x in text.split(",")}
            except ValueError:
                raise CannotRecompute(f"{path}: run.{column} = {ascii(text)}: expected a "
                                      f"comma-separated list of "
                                      f"{'integers' if kind is int else 'module names'}")
        self.filter = dict(iterations=listed("record_iterations", rit, int),
                           modules=listed("record_modules", rmod, str),
                           ranks=listed("record_ranks", rrank, int))
        self.filter_text = "; ".join(f"record.{k} = [{', '.join(map(str, sorted(v)))}]"
                                     for k, v in self.filter.items() if v is not None)
        if tomllib is None:
            raise CannotRecompute("Python 3.11 or newer is needed (tomllib) to read config_text")
        if not isinstance(text, str):
            raise CannotRecompute(f"{path}: run.config_text is not text")
        try:
            self.config = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise CannotRecompute(f"{path}: run.config_text is not TOML ({e})")
        for column, value in (("iterations", self.iterations), ("microbatches", self.m)):
            if not isinstance(value, int) or value < 1:
                raise CannotRecompute(f"{path}: run.{column} = {ascii(value)}: expected an "
                                      f"integer >= 1")
        self.ranks = {}  # (rank, module) -> dict(tp, pp, dp)
        for rank, module, tp, pp, dp in con.execute(
                "SELECT rank, module, tp, pp, dp FROM ranks"):
            self.ranks[(rank, module)] = dict(tp=tp, pp=pp, dp=dp)

    def filtered(self):
        return bool(self.filter_text)

    def keeps(self, iteration, rank):
        """Whether the filter kept rank `rank`'s records of `iteration` (a colocated rank is
        kept whole when any module it holds is listed)."""
        f = self.filter
        if f["iterations"] is not None and iteration not in f["iterations"]:
            return False
        if f["ranks"] is not None and rank not in f["ranks"]:
            return False
        return f["modules"] is None or any(m in f["modules"] for r, m in self.ranks if r == rank)

    def rows(self, sql, *args):
        return self.con.execute(sql, args).fetchall()


# ---- the model of docs/model.md, whole, in float64 -----------------------------------------

class Module:
    def __init__(self, cfg, run_cfg, llm_cfg, encoder_cfgs):
        self.name = cfg["name"]
        self.kind = cfg["kind"]
        self.tp, self.pp, self.dp = cfg["tp"], cfg["pp"], cfg["dp"]
        self.layers = cfg["layers"]
        self.hidden, self.heads, self.ffn = cfg["hidden"], cfg["heads"], cfg["ffn"]
        split = cfg.get("stage_layers")
        self.stage_layers = list(split) if split else [self.layers // self.pp] * self.pp
        if self.kind == "encoder":
            self.patches, self.patch_dim = cfg["patches"], cfg["patch_dim"]
            self.mbs = run_cfg["micro_batch_size"] * llm_cfg["dp"] // self.dp
        else:
            self.vocab, self.text_len = cfg["vocab"], cfg["text_len"]
            self.mbs = run_cfg["micro_batch_size"]
            self.seq = self.text_len + sum(e["patches"] for e in encoder_cfgs)
        self.llm_hidden = llm_cfg["hidden"]

    def last_layer_of_stage(self, s):
        return sum(self.stage_layers[: s + 1]) - 1

    def param_names(self):
        """Every parameter of the module with its full shape (docs/model.md, "Parameters")."""
        h, f, n = self.hidden, self.ffn, self.name
        out = []
        if self.kind == "encoder":
            out += [("patch_embed.weight", [h, self.patch_dim]), ("patch_embed.bias", [h]),
                    ("pos_embed", [self.patches, h])]
        else:
            out += [("tok_embed", [self.vocab, h]), ("pos_embed", [self.seq, h])]
        for l in range(self.layers):
            L = f"layers.{l}."
            out += [(L + "ln1.weight", [h]), (L + "ln1.bias", [h])]
            for x in "qkv":
                out += [(L + f"attn.{x}.weight", [h, h]), (L + f"attn.{x}.bias", [h])]
            out += [(L + "attn.o.weight", [h, h]), (L + "attn.o.bias", [h]),
                    (L + "ln2.weight", [h]), (L + "ln2.bias", [h]),
                    (L + "mlp.fc1.weight", [f, h]), (L + "mlp.fc1.bias", [f]),
                    (L + "mlp.fc2.weight", [h, f]), (L + "mlp.fc2.bias", [h])]
        out += [("final_ln.weight", [h]), ("final_ln.bias", [h])]
        if self.kind == "encoder":
            out += [("projector.weight", [self.llm_hidden, h]),
                    ("projector.bias", [self.llm_hidden])]
        else:
            out += [("head.weight", [self.vocab, h])]
        return [(f"{n}.{s}", shape) for s, shape in out]

    def stage_of(self, suffix):
        """The pipeline stage holding parameter `<module>.<suffix>` (docs/model.md)."""
        if suffix.startswith("layers."):
            l = int(suffix.split(".")[1])
            return next(s for s in range(self.pp) if l <= self.last_layer_of_stage(s))
        if suffix.startswith(("final_ln.", "projector.", "head.")):
            return self.pp - 1
        return 0

    def params_of_stage(self, s):
        n = len(self.name) + 1
        return [name for name, _ in self.param_names() if self.stage_of(name[n:]) == s]

    # x: [S, B, h]; P: parameter name -> tensor
    def block(self, P, x, l):
        L = f"{self.name}.layers.{l}."
        h, heads = self.hidden, self.heads
        dh = h // heads
        S, B = x.shape[0], x.shape[1]
        a = F.layer_norm(x, [h], P[L + "ln1.weight"], P[L + "ln1.bias"], 1e-5)

        def proj(n):
            y = F.linear(a, P[L + f"attn.{n}.weight"], P[L + f"attn.{n}.bias"])
            return y.reshape(S, B, heads, dh).permute(1, 2, 0, 3)  # [B, heads, S, dh]

        q, k, v = proj("q"), proj("k"), proj("v")
        scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
        if self.kind == "llm":
            causal = torch.ones(S, S, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(causal, float("-inf"))
        ctx = (scores.softmax(-1) @ v).permute(2, 0, 1, 3).reshape(S, B, h)
        y = x + F.linear(ctx, P[L + "attn.o.weight"], P[L + "attn.o.bias"])
        m = F.layer_norm(y, [h], P[L + "ln2.weight"], P[L + "ln2.bias"], 1e-5)
        hid = F.gelu(F.linear(m, P[L + "mlp.fc1.weight"], P[L + "mlp.fc1.bias"]))
        return y + F.linear(hid, P[L + "mlp.fc2.weight"], P[L + "mlp.fc2.bias"])

    def body(self, P, x, boundaries):
        """The blocks; the output of every stage but the last goes into `boundaries` (by
        stage) with retain_grad, as it is what that stage sends to the next."""
        for l in range(self.layers):
            x = self.block(P, x, l)
            for s in range(self.pp - 1):
                if l == self.last_layer_of_stage(s):
                    if x.requires_grad:
                        x.retain_grad()
                    boundaries[s] = x
        return F.layer_norm(x, [self.hidden], P[f"{self.name}.final_ln.weight"],
                            P[f"{self.name}.final_ln.bias"], 1e-5)


def encoder_forward(mod, P, patches, boundaries):
    """patches [b, P, d] -> [P, b, h_llm]."""
    n = mod.name
    x = F.linear(patches.transpose(0, 1), P[f"{n}.patch_embed.weight"], P[f"{n}.patch_embed.bias"])
    x = x + P[f"{n}.pos_embed"].unsqueeze(1)
    y = mod.body(P, x, boundaries)
    return F.linear(y, P[f"{n}.projector.weight"], P[f"{n}.projector.bias"])


def llm_forward(mod, P, encoder_outputs, tokens, boundaries):
    """encoder_outputs: [P_e, b, h] in config order; tokens [b, T+1] -> (mean cross-entropy)."""
    n, T = mod.name, mod.text_len
    x = torch.cat(list(encoder_outputs) + [P[f"{n}.tok_embed"][tokens[:, :T].transpose(0, 1)]], 0)
    x = x + P[f"{n}.pos_embed"].unsqueeze(1)
    y = mod.body(P, x, boundaries)
    logits = F.linear(y[-T:], P[f"{n}.head.weight"])  # [T, b, V]
    labels = tokens[:, 1:T + 1].transpose(0, 1)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


# ---- comparison ----------------------------------------------------------------------------

class Verdict:
    def __init__(self, max_report):
        self.max_report = max_report
        self.mismatches = []   # (severity ratio, line)
        self.checked = {}      # category -> count
        self.worst = {}        # category -> worst ratio err/tol

    def note(self, category, ratio, line):
        self.checked[category] = self.checked.get(category, 0) + 1
        if not (ratio <= self.worst.get(category, 0.0)):
            self.worst[category] = ratio
        if not ratio <= 1.0:
            self.mismatches.append((ratio, line))

    def compare(self, category, what, got, ref, tol_rel, floor=1.0):
        """got: recorded; ref: recomputed.  max |got - ref| <= tol_rel * max(floor, max|ref|)."""
        if list(got.shape) != list(ref.shape):
            self.note(category, math.inf, f"{what}: shape {list(got.shape)} recorded, "
                                          f"{list(ref.shape)} recomputed")
            return
        if got.numel() == 0:
            self.note(category, 0.0, "")
            return
        scale = max(floor, ref.abs().max().item())
        tol = tol_rel * scale
        diff = (got - ref).abs()
        bad = ~torch.isfinite(got) | ~torch.isfinite(ref)
        if bad.any():
            diff = torch.where(bad & ~((got == ref) | (got.isnan() & ref.isnan())),
                               torch.full_like(diff, math.inf), torch.nan_to_num(diff))
        i = int(diff.reshape(-1).argmax())
        worst = diff.reshape(-1)[i].item()
        ratio = worst / tol if tol > 0 else (0.0 if worst == 0 else math.inf)
        idx = list(torch.unravel_index(torch.tensor(i), got.shape)) if got.dim() else []
        idx = [int(v) for v in idx]
        self.note(category, ratio,
                  f"{what}: element {idx} recorded {got.reshape(-1)[i].item():.9g} recomputed "
                  f"{ref.reshape(-1)[i].item():.9g}, |diff| {worst:.3g} > tol {tol:.3g}")


def rel_loss(what, got, ref, tol, verdict):
    """|got - ref| <= tol * max(1, |ref|): relative for losses above 1, absolute below.  The
    ranks compute the cross-entropy in float32 as logsumexp(logits) - logit(label), so its
    round-off is a few ulps of the logits, not of the loss: a confident prediction's loss of
    0.025 came out 2.4e-6 relative (6e-8 absolute) from the float64 value in a correct run."""
    got = float(got)
    if math.isnan(got) or math.isnan(ref):
        ratio = 0.0 if (math.isnan(got) and math.isnan(ref)) else math.inf
    else:
        ratio = abs(got - ref) / (tol * max(abs(ref), 1.0))
    verdict.note("loss", ratio, f"{what}: recorded {got:.9g} recomputed {ref:.9g}, diff "
                                f"{abs(got - ref):.3g} > tol {tol * max(abs(ref), 1.0):.3g}")


def describe(key):
    """A transfer key of the recomputation in words."""
    if key[0] == "bridge":
        return f"bridge from {key[1]} dp {key[2]} to llm dp {key[3]}"
    return f"{key[1]}:pp{key[2]}->pp{key[2] + 1} dp {key[3]}"


def rel_l2(got, ref, floor):
    """||got - ref|| / max(||got||, ||ref||, floor); inf for a non-finite value on one side."""
    if not (torch.isfinite(got).all() and torch.isfinite(ref).all()):
        return 0.0 if torch.equal(got.isnan(), ref.isnan()) and torch.equal(
            torch.nan_to_num(got), torch.nan_to_num(ref)) else math.inf
    den = max(got.norm().item(), ref.norm().item(), floor)
    return (got - ref).norm().item() / den if den > 0 else 0.0


def shard_of(full, dim, offset, shape):
    return full if dim < 0 else full.narrow(dim, offset, shape[dim])


# ---- one iteration -------------------------------------------------------------------------

class Recompute:
    def __init__(self, run, args):
        self.run, self.args = run, args
        cfg = run.config
        mods = cfg.get("modules", [])
        llms = [m for m in mods if m.get("kind") == "llm"]
        if len(llms) != 1:
            raise CannotRecompute(f"{run.path}: config has {len(llms)} llm modules, expected 1")
        encs = [m for m in mods if m.get("kind") == "encoder"]
        if cfg.get("dtype", "float32") not in ("float32", "bfloat16"):
            raise CannotRecompute(f"{run.path}: dtype = {cfg.get('dtype')!r}: expected float32 "
                                  f"or bfloat16")
        # bfloat16 runs are judged by relative L2 against a bound scaled by how far plain
        # PyTorch's own bfloat16 computation lands (docs/recompute.md, "bfloat16 runs").
        self.low_precision = cfg.get("dtype", "float32") == "bfloat16"
        for m in mods:
            if m.get("cp", 1) != 1:
                raise CannotRecompute(f"{run.path}: modules.{m['name']}.cp = {m['cp']}: expected 1")
        self.llm = Module(llms[0], cfg, llms[0], encs)
        self.encoders = [Module(e, cfg, llms[0], encs) for e in encs]  # config order
        self.modules = {m.name: m for m in self.encoders + [self.llm]}
        for name, down in run.rows("SELECT name, downstream FROM modules"):
            want = self.llm.name if self.modules.get(name) and \
                self.modules[name].kind == "encoder" else ""
            if down != want:
                raise CannotRecompute(f"{run.path}: module {name} feeds {down!r}; recompute "
                                      f"models encoders feeding the llm directly ({want!r})")
        self.m = cfg["microbatches"]
        self.scale = float(cfg.get("loss_scale", 1.0))
        self.forward_only = bool(cfg.get("forward_only", False))
        self.opt = dict(kind="sgd", lr=0.01, momentum=0.0, beta1=0.9, beta2=0.999, eps=1e-8,
                        weight_decay=0.0)
        self.opt.update(cfg.get("optimizer", {}))
        self.opt_state = {}  # module -> (optimizer, {name: tensor})
        # Adam and SGD with momentum carry state from step to step (a filtered-out step loses it)
        self.stateful = self.opt["kind"] == "adam" or self.opt["momentum"] != 0
        self.state_lost = set()  # parameters whose optimizer state the file cannot give
        self.step_not_checked = set()  # of the current iteration

    # -- parameters --
    def gather(self, iteration, phase, verdict, same_copies=True):
        """Full parameters from the recorded shards of `phase` (param_initial of iteration 0
        or param_after_step of `iteration`); every copy of a shard (TP-replicated, DP
        replicas) must be bit-identical."""
        full, covered = {}, {}
        rows = self.run.rows(
            "SELECT rank, param, module, partition_dim, partition_offset, shape, full_shape, "
            "dtype, payload FROM gradients WHERE iteration = ? AND phase = ? ORDER BY rank",
            iteration, phase)
        for rank, param, module, pdim, poff, shape, fshape, dtype, payload in rows:
            where = f"gradients {phase} iteration {iteration} rank {rank} {param}"
            t = tensor_of(payload, dtype, dims(shape), where)
            fs = dims(fshape)
            if param not in full:
                full[param] = torch.full(fs, math.nan, dtype=torch.float64)
                covered[param] = torch.zeros(fs, dtype=torch.bool)
            dst = shard_of(full[param], pdim, poff, dims(shape))
            cov = shard_of(covered[param], pdim, poff, dims(shape))
            if cov.all():
                if not same_copies:
                    continue
                verdict.compare("replicas", f"{param} {phase} iteration {iteration}: rank {rank}'s "
                                f"copy against the first", t, dst.clone(), 0.0)
            else:
                dst.copy_(t)
                cov.fill_(True)
        missing = []
        for mod in self.modules.values():
            for name, shape in mod.param_names():
                if name not in full:
                    missing.append(name)
                elif list(full[name].shape) != shape:
                    raise CannotRecompute(f"{name}: full_shape {list(full[name].shape)} recorded,"
                                          f" docs/model.md gives {shape}")
                elif not covered[name].all():
                    missing.append(f"{name} (part)")
        extra = sorted(set(full) - {n for mod in self.modules.values() for n, _ in mod.param_names()})
        if extra:
            raise CannotRecompute(f"{phase} iteration {iteration}: recorded parameters the model "
                                  f"does not have: {', '.join(extra[:5])}")
        return full, missing, covered

    def inputs(self, iteration):
        """(module, dp replica, microbatch) -> input tensor, every first-stage copy identical."""
        out = {}
        for rank, mb, module, name, shape, dtype, payload in self.run.rows(
                "SELECT rank, microbatch, module, name, shape, dtype, payload FROM inputs "
                "WHERE iteration = ? ORDER BY rank", iteration):
            r = self.run.ranks.get((rank, module))
            if r is None:
                raise CannotRecompute(f"inputs: rank {rank} has no ranks row for module {module}")
            t = tensor_of(payload, dtype, dims(shape), f"inputs iteration {iteration} rank {rank} "
                                                      f"{module} {name}")
            key = (module, r["dp"], mb)
            if key in out and not torch.equal(out[key], t):
                raise CannotRecompute(f"inputs iteration {iteration} microbatch {mb} {module} dp "
                                      f"{r['dp']}: rank {rank}'s copy differs from another's")
            out[key] = t
        return out

    # -- the step --
    def iteration(self, t, params, verdict):
        inputs = self.inputs(t)
        for mod in self.modules.values():
            for d in range(mod.dp):
                for j in range(self.m):
                    if (mod.name, d, j) not in inputs:
                        why = f"no input recorded for {mod.name} dp {d} microbatch {j}"
                        if self.run.filtered():
                            raise NotChecked(f"{why} ({self.run.filter_text})")
                        raise CannotRecompute(f"iteration {t}: {why}")
        grad = not self.forward_only
        # One parameter copy per (module, dp replica): its .grad is that replica's local
        # gradient, as the ranks of that replica hold it before the reduction.
        copies = {(mod.name, d): {n: params[n].clone().requires_grad_(grad)
                                  for n, _ in mod.param_names()}
                  for mod in self.modules.values() for d in range(mod.dp)}
        expected = {}  # transfer key -> (activation, gradient tensor or None)
        losses = {}
        accumulated = {}  # (module, dp, mb) -> {param: grad}
        for j in range(self.m):
            with torch.set_grad_enabled(grad):
                lossj, tensors = self.microbatch(t, j, copies, inputs, losses)
                if grad:
                    lossj.backward()
            for key, x in tensors.items():
                g = x.grad * self.scale if (grad and x.grad is not None) else None
                expected[(key, j)] = (x.detach(), g)
            if grad:
                for (name, d), P in copies.items():
                    accumulated[(name, d, j)] = {n: (p.grad.clone() if p.grad is not None
                                                     else torch.zeros_like(p))
                                                 for n, p in P.items()}
        self.last_losses = losses
        self.check_losses(t, losses, verdict)
        self.check_transfers(t, expected, verdict)
        if grad:
            reduced = {}
            for mod in self.modules.values():
                for n, _ in mod.param_names():
                    s = sum(accumulated[(mod.name, d, self.m - 1)][n] for d in range(mod.dp))
                    reduced[n] = s / self.llm.dp
            self.check_gradients(t, accumulated, reduced, verdict)
            self.recomputed_reduced = reduced

    # -- bfloat16 runs --
    def computed_in(self, t, params, dtype):
        """(reduced gradients, microbatch losses) of iteration t computed by this model from
        `params` in `dtype` (inputs in that dtype too, as the ranks cast them)."""
        recorded_inputs = self.inputs
        if dtype != torch.float64:
            self.inputs = lambda it: {k: (v.to(dtype) if v.is_floating_point() else v)
                                      for k, v in recorded_inputs(it).items()}
        try:
            self.iteration(t, {n: p.to(dtype) for n, p in params.items()}, Verdict(0))
        finally:
            self.inputs = recorded_inputs
        reduced = getattr(self, "recomputed_reduced", {}) if not self.forward_only else {}
        return ({n: g.to(torch.float64) for n, g in reduced.items()}, dict(self.last_losses))

    def iteration_low_precision(self, t, params, verdict):
        """A bfloat16 run's iteration t from its own parameters: every recorded reduced gradient
        (gathered) and loss against the float64 truth, relative L2 over the tensor with the floor
        LOW_FLOOR x the model's gradient norm, bound max(LOW_BASE, LOW_FACTOR x d), d = how far this
        model computed in bfloat16 from the same parameters lands from the truth."""
        truth, truth_losses = self.computed_in(t, params, torch.float64)
        low, low_losses = self.computed_in(t, params, torch.bfloat16)
        if not self.forward_only:
            self.recomputed_reduced = truth
        for (mb, dp), loss in self.recorded_losses(t, verdict):
            ref = truth_losses[(mb, dp)] if mb >= 0 else \
                sum(truth_losses.values()) / len(truth_losses)
            ref_low = low_losses[(mb, dp)] if mb >= 0 else \
                sum(low_losses.values()) / len(low_losses)
            bound = max(LOW_LOSS_BASE * max(1.0, abs(ref)), LOW_FACTOR * abs(ref_low - ref))
            what = f"loss iteration {t}" + (f" microbatch {mb} dp {dp}" if mb >= 0 else " (mean)")
            verdict.note("loss", abs(loss - ref) / bound if bound > 0 else math.inf,
                         f"{what}: recorded {loss:.9g} recomputed {ref:.9g}, |diff| "
                         f"{abs(loss - ref):.3g} > bound {bound:.3g}")
        if self.forward_only:
            return
        recorded, lost, covered = gathered_reduced(self, t, verdict)
        floor = LOW_FLOOR * math.sqrt(sum(g.norm().item() ** 2 for g in truth.values()))
        for n, ref in truth.items():
            if n not in recorded or not covered[n].all():
                if not self.run.filtered():
                    verdict.note("coverage", math.inf, f"gradient {n} reduced iteration {t}: "
                                                       f"not recorded whole")
                continue
            a, d = rel_l2(recorded[n], ref, floor), rel_l2(low[n], ref, floor)
            bound = max(LOW_BASE, LOW_FACTOR * d)
            verdict.note("gradient reduced", a / bound,
                         f"gradient {n} reduced iteration {t}: relative L2 {a:.3g} from the "
                         f"float64 recomputation > bound {bound:.3g} (bfloat16 here: {d:.3g})")

    def recorded_losses(self, t, verdict):
        """((microbatch, dp), loss) of every recorded loss of iteration t (microbatch -1: the
        iteration's mean)."""
        return [((mb, dp), loss) for _, mb, dp, loss in self.run.rows(
            "SELECT rank, microbatch, dp, loss FROM losses WHERE iteration = ?", t)]

    def microbatch(self, t, j, copies, inputs, losses):
        """Forward of global microbatch j; returns (sum over llm replicas of CE / m, the tensors
        that travel: transfer key -> tensor with retained grad)."""
        tensors = {}
        enc_out = {}
        for mod in self.encoders:
            for e in range(mod.dp):
                b = {}
                enc_out[(mod.name, e)] = encoder_forward(mod, copies[(mod.name, e)],
                                                         inputs[(mod.name, e, j)], b)
                for s, x in b.items():
                    tensors[("p2p", mod.name, s, e, e)] = x
        total = 0.0
        mbs = self.llm.mbs
        for r in range(self.llm.dp):
            lo, hi = r * mbs, (r + 1) * mbs  # global samples of llm replica r (docs/model.md)
            outs = []
            for mod in self.encoders:
                pieces = []
                for e in range(mod.dp):
                    elo, ehi = e * mod.mbs, (e + 1) * mod.mbs
                    a, z = max(lo, elo), min(hi, ehi)
                    if a >= z:
                        continue
                    piece = enc_out[(mod.name, e)][:, a - elo:z - elo]
                    if piece.requires_grad:
                        piece.retain_grad()
                    tensors[("bridge", mod.name, e, r)] = piece
                    pieces.append(piece)
                outs.append(torch.cat(pieces, 1))
            b = {}
            ce = llm_forward(self.llm, copies[(self.llm.name, r)], outs,
                             inputs[(self.llm.name, r, j)], b)
            for s, x in b.items():
                tensors[("p2p", self.llm.name, s, r, r)] = x
            losses[(j, r)] = ce.item()
            total = total + ce / self.m
        return total, tensors

    def check_losses(self, t, losses, verdict):
        tol = self.args.tol_loss
        rows = self.run.rows("SELECT rank, microbatch, dp, loss FROM losses WHERE iteration = ?", t)
        seen = set()
        for rank, mb, dp, loss in rows:
            if mb >= 0:
                seen.add((mb, dp))
                if (mb, dp) not in losses:
                    verdict.note("loss", math.inf, f"loss iteration {t} microbatch {mb} dp {dp} "
                                                   f"(rank {rank}): no such microbatch")
                    continue
                rel_loss(f"loss iteration {t} microbatch {mb} dp {dp} (rank {rank})", loss,
                         losses[(mb, dp)], tol, verdict)
            else:
                mean = sum(losses.values()) / len(losses)
                rel_loss(f"loss iteration {t} (mean, rank {rank})", loss, mean, tol, verdict)
        for key in sorted(set(losses) - seen):
            # every rank of the llm's last stage of replica dp records it; a filter may drop all
            last = [r for (r, m), c in self.run.ranks.items() if m == self.llm.name and
                    c["pp"] == self.llm.pp - 1 and c["dp"] == key[1]]
            if any(self.run.keeps(t, r) for r in last):
                verdict.note("loss", math.inf, f"loss iteration {t} microbatch {key[0]} dp "
                                               f"{key[1]}: not recorded by any rank")

    def check_transfers(self, t, expected, verdict):
        tol = self.args.tol_grad
        rows = self.run.rows(
            "SELECT rank, side, src_rank, dst_rank, edge, edge_kind, direction, microbatch, "
            "shape, dtype, payload FROM transfers WHERE iteration = ?", t)
        sides = {}  # (key, microbatch, direction) -> {'send', 'recv'} recorded
        for rank, side, src, dst, edge, kind, direction, mb, shape, dtype, payload in rows:
            what = (f"transfer {edge} {direction} iteration {t} microbatch {mb} {side} on rank "
                    f"{rank} ({src}->{dst})")
            # src/dst are the message's sender and receiver: for a gradient the upstream side
            # (the edge's first end) is the receiver.
            up, down = (src, dst) if direction == "activation" else (dst, src)
            key = self.transfer_key(edge, kind, up, down, what)
            sides.setdefault((key, mb, direction), set()).add(side)
            if payload is None:
                verdict.note("coverage", math.inf, f"{what}: no payload at level full")
                continue
            got = tensor_of(payload, dtype, dims(shape), what)
            if (key, mb) not in expected:
                verdict.note("payload", math.inf, f"{what}: the recomputed step sends no such "
                                                  f"tensor")
                continue
            act, g = expected[(key, mb)]
            ref = act if direction == "activation" else g
            if ref is None:
                verdict.note("payload", math.inf, f"{what}: the recomputed step has no {direction}")
                continue
            verdict.compare("payload", what, got, ref, tol)
        # Nothing lost: every tensor that crosses a stage or module boundary in the
        # recomputation was recorded by its sender and its receiver.
        # Under a [record] filter, only the sides whose recording rank the filter kept.
        directions = ["activation"] + ([] if self.forward_only else ["gradient"])
        for (key, mb) in sorted(expected, key=str):
            up, down = self.ends(key)
            for direction in directions:
                got = sides.get((key, mb, direction), set())
                send, recv = (up, down) if direction == "activation" else (down, up)
                want = {side for side, (ranks, need) in (("send", send), ("recv", recv))
                        if need(self.run.keeps(t, r) for r in ranks)}
                verdict.note("coverage", 0.0 if want <= got else math.inf,
                             f"transfer {describe(key)} {direction} iteration {t} microbatch "
                             f"{mb}: recorded sides {sorted(got)}, expected "
                             f"{' and '.join(x for x in ('send', 'recv') if x in want)}")

    def ends(self, key):
        """(upstream, downstream) of transfer `key`, each (ranks, rule): a side must be recorded
        when rule(the filter keeps each of those ranks) holds.  Every TP rank of a pipeline
        stage sends and receives its own copy (any kept rank records one); a bridge is recorded
        by one leader of each end's replica (schedule.md §3.2; colocation may pick another TP
        rank, docs/config.md), so a side is required only when its whole replica was kept."""
        def ranks_of(module, **coords):
            return [r for (r, m), c in self.run.ranks.items()
                    if m == module and all(c[k] == v for k, v in coords.items())]
        if key[0] == "bridge":
            enc = self.modules[key[1]]
            return ((ranks_of(enc.name, pp=enc.pp - 1, dp=key[2]), all),
                    (ranks_of(self.llm.name, pp=0, dp=key[3]), all))
        return ((ranks_of(key[1], pp=key[2], dp=key[3]), any),
                (ranks_of(key[1], pp=key[2] + 1, dp=key[3]), any))

    def transfer_key(self, edge, kind, src, dst, what):
        if kind == "bridge":
            a, _, b = edge.partition("->")
            ra, rb = self.run.ranks.get((src, a)), self.run.ranks.get((dst, b))
            if ra is None or rb is None or a not in self.modules:
                raise CannotRecompute(f"{what}: ranks {src}/{dst} hold no {a}/{b} stage")
            return ("bridge", a, ra["dp"], rb["dp"])
        module, _, stages = edge.partition(":")
        r = self.run.ranks.get((src, module))
        if r is None:
            raise CannotRecompute(f"{what}: rank {src} holds no {module} stage")
        return ("p2p", module, r["pp"], r["dp"], r["dp"])

    def check_gradients(self, t, accumulated, reduced, verdict):
        tol = self.args.tol_grad
        seen = set()
        for rank, mb, phase, param, module, pdim, poff, shape, dtype, payload in self.run.rows(
                "SELECT rank, microbatch, phase, param, module, partition_dim, partition_offset, "
                "shape, dtype, payload FROM gradients WHERE iteration = ? AND phase IN "
                "('accumulated', 'reduced')", t):
            r = self.run.ranks.get((rank, module))
            what = (f"gradient {param} {phase} iteration {t}"
                    + (f" microbatch {mb}" if mb >= 0 else "") + f" rank {rank} (tp {r['tp']} "
                    f"pp {r['pp']} dp {r['dp']})")
            seen.add((rank, module, phase, mb, param))
            if payload is None:
                verdict.note("coverage", math.inf, f"{what}: no payload at level full")
                continue
            got = tensor_of(payload, dtype, dims(shape), what)
            if phase == "reduced":
                full = reduced[param]
            else:
                full = accumulated[(module, r["dp"], mb)][param]
            verdict.compare("gradient " + phase, what, got, shard_of(full, pdim, poff, dims(shape)),
                            tol)
        # Nothing lost: every rank records every parameter of its stage, per microbatch and
        # after the reduction.
        for (rank, module), r in sorted(self.run.ranks.items()):
            if not self.run.keeps(t, rank):
                continue  # left out by the [record] filter: not checked
            names = self.modules[module].params_of_stage(r["pp"])
            for phase, mbs in (("accumulated", range(self.m)), ("reduced", [-1])):
                for mb in mbs:
                    lost = [n for n in names if (rank, module, phase, mb, n) not in seen]
                    verdict.note("coverage", math.inf if lost else 0.0,
                                 f"gradient {phase} iteration {t}" +
                                 (f" microbatch {mb}" if mb >= 0 else "") +
                                 f" rank {rank} ({module} stage {r['pp']}): {len(lost)} of "
                                 f"{len(names)} parameters not recorded ({', '.join(lost[:3])})")

    # -- the optimizer --
    def check_step(self, t, before, reduced_rows, after, covered, unknown, verdict):
        """Applies the configured optimizer (docs/model.md, "Optimizer") to `before` with the
        recorded reduced gradients; compares with the recorded `after` where `covered`.
        Parameters in `unknown` (their reduced gradient was left out by a [record] filter) are
        not stepped, and with a stateful optimizer (Adam, SGD with momentum) neither they nor
        any parameter after an iteration that was not checked are judged again: their state
        depends on gradients the file does not hold."""
        o = self.opt
        for mod in self.modules.values():
            if mod.name not in self.opt_state:
                # In float32, the dtype the ranks step in: with weight decay, grad + wd * p can
                # cancel to a few ulps of the gradient, and Adam divides by its magnitude, so
                # the step in float64 differs from the float32 step by more than float32's
                # rounding of the parameter (seen: 1.5e-6 at lr 0.01, weight_decay 0.01).
                P = {n: torch.zeros(s, dtype=torch.float32) for n, s in mod.param_names()}
                ps = [P[n] for n, _ in mod.param_names()]
                if o["kind"] == "adam":
                    opt = torch.optim.Adam(ps, lr=o["lr"], betas=(o["beta1"], o["beta2"]),
                                           eps=o["eps"], weight_decay=o["weight_decay"],
                                           foreach=False)
                else:
                    opt = torch.optim.SGD(ps, lr=o["lr"], momentum=o["momentum"],
                                          weight_decay=o["weight_decay"], foreach=False)
                self.opt_state[mod.name] = (opt, P)
            opt, P = self.opt_state[mod.name]
            for n, _ in mod.param_names():
                with torch.no_grad():
                    P[n].copy_(before[n])
                if n in unknown:
                    P[n].grad = None  # not stepped: the optimizer leaves its state as it was
                    if self.stateful:
                        self.state_lost.add(n)
                else:
                    P[n].grad = reduced_rows[n].to(torch.float32)
            opt.step()
            for n, _ in mod.param_names():
                if n not in after or n in unknown or n in self.state_lost:
                    if n in after:
                        self.step_not_checked.add(n)
                    continue
                got, ref = after[n], P[n].detach().to(torch.float64)
                if not covered[n].all():  # a [record] filter kept some shards only
                    got, ref = got[covered[n]], ref[covered[n]]
                verdict.compare("step", f"parameter {n} after the step of iteration {t}",
                                got, ref, TOL_PARAM)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("--tol-grad", type=float, default=1e-5,
                    help="gradients and payloads: max|x-x_ref| <= TOL*max(1,max|x_ref|)")
    ap.add_argument("--tol-loss", type=float, default=1e-6,
                    help="losses: |l-l_ref| <= TOL*max(1,|l_ref|)")
    ap.add_argument("--max-report", type=int, default=10, help="mismatches printed per iteration")
    a = ap.parse_args(argv)
    if torch is None:
        print("recompute: cannot recompute: Python torch is not importable (bootstrap installs it "
              "into .venv)", file=sys.stderr)
        return EXIT_CANNOT
    torch.set_default_dtype(torch.float64)
    try:
        run = Run(a.run)
        rc = Recompute(run, a)
        params, missing, _ = rc.gather(0, "param_initial", Verdict(a.max_report))
        why = None  # why the parameters before the next iteration are not known
        if missing:
            why = f"initial parameters not recorded: {', '.join(missing[:5])}"
            if not run.filtered():
                raise CannotRecompute(f"{run.path}: {why}")
            params = None
        failed, not_checked = 0, []
        for t in range(run.iterations):
            v = Verdict(a.max_report)
            rc.step_not_checked = set()
            try:
                if params is None:
                    raise NotChecked(f"{why} ({run.filter_text})")
                if rc.low_precision:
                    rc.iteration_low_precision(t, params, v)
                else:
                    rc.iteration(t, params, v)
            except NotChecked as e:
                print(f"iteration {t}: NOT CHECKED: {e}")
                not_checked.append(t)
                rc.state_lost.update(n for m in rc.modules.values() for n, _ in m.param_names()
                                     if rc.stateful)
                if not rc.forward_only:  # the next iteration may start from recorded params
                    params, missing, _ = rc.gather(t, "param_after_step", Verdict(0))
                    why = f"parameters after the step of iteration {t} not recorded: " \
                          f"{', '.join(missing[:5])}"
                    params = None if missing else params
                continue
            after = {}
            if not rc.forward_only:
                after, missing, covered = rc.gather(t, "param_after_step", v)
                if missing and not run.filtered():
                    raise CannotRecompute(f"iteration {t}: parameters after the step not "
                                          f"recorded: {', '.join(missing[:5])}")
                reduced, lost, _ = gathered_reduced(rc, t, v)
                unknown = set()
                for n in lost:
                    name = n.split(" ")[0]
                    if run.filtered():  # left out by the filter: that parameter's step is not
                        unknown.add(name)  # checked
                    else:
                        # A reduced gradient not recorded (already a coverage mismatch) steps
                        # with the recomputed one, so the optimizer check goes on for the rest.
                        reduced[name] = rc.recomputed_reduced[name]
                if not rc.low_precision:  # bfloat16: the step is not judged (recompute.md)
                    rc.check_step(t, params, reduced, after, covered, unknown, v)
            summary = ", ".join(f"{n} {k} (worst {v.worst.get(k, 0):.2g} of tol)"
                                for k, n in sorted(v.checked.items()))
            if rc.step_not_checked:
                summary += (f"; the step of {len(rc.step_not_checked)} parameters not checked "
                            f"(their reduced gradient or optimizer state is not recorded: "
                            f"{run.filter_text})")
            if v.mismatches:
                failed += 1
                print(f"iteration {t}: MISMATCH: {len(v.mismatches)} of "
                      f"{sum(v.checked.values())} recorded values differ from the recomputation "
                      f"({summary})")
                for ratio, line in sorted(v.mismatches, key=lambda x: -x[0])[: a.max_report]:
                    print(f"  {line}")
            else:
                print(f"iteration {t}: MATCH: {sum(v.checked.values())} recorded values agree "
                      f"with the recomputation ({summary})")
            if not rc.forward_only:
                params = None if missing else after
                why = f"parameters after the step of iteration {t} not recorded: " \
                      f"{', '.join(missing[:5])}"
        checked = run.iterations - len(not_checked)
        if checked == 0:
            raise CannotRecompute(f"{run.path}: no iteration can be recomputed from what the "
                                  f"[record] filter kept ({run.filter_text})")
        verdict = "MISMATCH" if failed else "MATCH"
        rest = (f"; {len(not_checked)} not checked: iteration "
                f"{', '.join(map(str, not_checked))} ({run.filter_text})" if not_checked else "")
        print(f"recompute {run.path}: {verdict} ({failed} of {checked} iterations differ{rest})")
        return EXIT_MISMATCH if failed else EXIT_OK
    except CannotRecompute as e:
        print(f"recompute: cannot recompute: {e}", file=sys.stderr)
        return EXIT_CANNOT
    except (sqlite3.Error, KeyError, ValueError, TypeError, IndexError, AttributeError,
            ZeroDivisionError, OverflowError, RuntimeError) as e:
        # A run file whose tables or config hold what no stagescope writes (a hostile or
        # damaged file): one line, never a traceback.
        why = str(e).splitlines()[0] if str(e) else ""
        print(f"recompute: cannot recompute: {a.run}: malformed run file "
              f"({type(e).__name__}: {ascii(why)[1:-1]})", file=sys.stderr)
        return EXIT_CANNOT


def gathered_reduced(rc, t, verdict):
    """The recorded reduced gradients, gathered to full tensors (for the optimizer check)."""
    return rc.gather(t, "reduced", verdict, same_copies=False)


if __name__ == "__main__":
    sys.exit(main())
