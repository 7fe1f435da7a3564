#!/usr/bin/env python3
"""PyTorch's own pipelining (torch.distributed.pipelining.Schedule1F1B) on the same
language-model-only stack that stagescope runs, for the engine-vs-PyTorch benchmark.

Spawns `--pp` CPU processes (no torchrun) that join a Gloo process group, build their stage
with stagescope's layout-independent initial weights (core/engine/Init.cpp), and train for
`--iterations` iterations with Adam.  The last stage's rank reports per-iteration losses and
step times as JSON on stdout (one line, prefixed "RESULT ").

  --verify-runfile RUN.db  first compare the initial weights against a stagescope run recorded
                           with `--record full` (gradients rows of phase param_initial); exit 1
                           if any differs.  With --iterations 0, only that.
"""
import argparse
import json
import math
import os
import socket
import sqlite3
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# Layout-independent initialisation, mirroring core/engine/Init.cpp.

FNV_BASIS = 14695981039346656037  # standard FNV-1a 64 offset basis, as Init.h (events::fnv1a64)
FNV_PRIME = 1099511628211
MASK64 = (1 << 64) - 1


def fnv1a(text, seed=FNV_BASIS):
    h = seed
    for c in text.encode():
        h = ((h ^ c) * FNV_PRIME) & MASK64
    return h


def generator_for(key):
    g = torch.Generator()
    g.manual_seed(fnv1a(key))
    return g


LINEAR, BIAS, NORM_WEIGHT, NORM_BIAS, EMBEDDING, POSITION = range(6)


def initial_full(seed, name, shape, kind):
    g = generator_for(f"{seed}/param/{name}")
    z = torch.normal(0.0, 1.0, size=tuple(shape), generator=g, dtype=torch.float32)
    if kind == LINEAR:
        return z / math.sqrt(float(shape[-1]))
    if kind in (BIAS, NORM_BIAS, POSITION):
        return z * 0.1
    if kind == NORM_WEIGHT:
        return z * 0.1 + 1.0
    return z


def sample_tokens(seed, iteration, sample, text_len, vocab):
    g = generator_for(f"{seed}/data/{iteration}/{sample}/tokens")
    return torch.randint(vocab, (text_len + 1,), generator=g, dtype=torch.long)


def global_batch(a, iteration):
    n = a.microbatches * a.mbs
    return torch.stack([sample_tokens(a.seed, iteration, i, a.text_len, a.vocab) for i in range(n)])


# ---------------------------------------------------------------------------------------------
# The model: pre-LN blocks as in core/engine/StageModel.cpp, batch-first [B, S, h].


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        h, f = a.hidden, a.ffn
        self.heads, self.dh = a.heads, h // a.heads
        self.ln1 = nn.LayerNorm(h, eps=1e-5)
        self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
        self.ln2 = nn.LayerNorm(h, eps=1e-5)
        self.fc1 = nn.Linear(h, f)
        self.fc2 = nn.Linear(f, h)

    def attention(self, x):
        B, S, _ = x.shape

        def proj(lin):
            return lin(x).view(B, S, self.heads, self.dh).permute(0, 2, 1, 3)

        q, k, v = proj(self.q), proj(self.k), proj(self.v)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.dh)
        mask = torch.ones(S, S, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        ctx = torch.matmul(torch.softmax(scores, -1), v)
        return self.o(ctx.permute(0, 2, 1, 3).reshape(B, S, self.heads * self.dh))

    def forward(self, x):
        y = x + self.attention(self.ln1(x))
        return y + self.fc2(F.gelu(self.fc1(self.ln2(y))))


class Stage(nn.Module):
    def __init__(self, a, stage):
        super().__init__()
        self.first, self.last = stage == 0, stage == a.pp - 1
        per = a.layers // a.pp
        self.layer_ids = list(range(stage * per, (stage + 1) * per))
        if self.first:
            self.tok_embed = nn.Parameter(torch.empty(a.vocab, a.hidden))
            self.pos_embed = nn.Parameter(torch.empty(a.text_len, a.hidden))
        self.blocks = nn.ModuleList(Block(a) for _ in self.layer_ids)
        if self.last:
            self.final_ln = nn.LayerNorm(a.hidden, eps=1e-5)
            self.head = nn.Linear(a.hidden, a.vocab, bias=False)
        self.a = a
        with torch.no_grad():
            for name, (t, kind) in self.named_init().items():
                t.copy_(initial_full(a.seed, name, list(t.shape), kind))

    def named_init(self):
        """stagescope's full parameter name -> (our tensor, init kind)."""
        m = self.a.module
        out = {}
        if self.first:
            out[f"{m}.tok_embed"] = (self.tok_embed, EMBEDDING)
            out[f"{m}.pos_embed"] = (self.pos_embed, POSITION)
        for l, b in zip(self.layer_ids, self.blocks):
            L = f"{m}.layers.{l}."
            out[L + "ln1.weight"] = (b.ln1.weight, NORM_WEIGHT)
            out[L + "ln1.bias"] = (b.ln1.bias, NORM_BIAS)
            for n in ("q", "k", "v", "o"):
                lin = getattr(b, n)
                out[L + f"attn.{n}.weight"] = (lin.weight, LINEAR)
                out[L + f"attn.{n}.bias"] = (lin.bias, BIAS)
            out[L + "ln2.weight"] = (b.ln2.weight, NORM_WEIGHT)
            out[L + "ln2.bias"] = (b.ln2.bias, NORM_BIAS)
            out[L + "mlp.fc1.weight"] = (b.fc1.weight, LINEAR)
            out[L + "mlp.fc1.bias"] = (b.fc1.bias, BIAS)
            out[L + "mlp.fc2.weight"] = (b.fc2.weight, LINEAR)
            out[L + "mlp.fc2.bias"] = (b.fc2.bias, BIAS)
        if self.last:
            out[f"{m}.final_ln.weight"] = (self.final_ln.weight, NORM_WEIGHT)
            out[f"{m}.final_ln.bias"] = (self.final_ln.bias, NORM_BIAS)
            out[f"{m}.head.weight"] = (self.head.weight, LINEAR)
        return out

    def forward(self, x):
        if self.first:
            x = F.embedding(x, self.tok_embed) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        if self.last:
            x = self.head(self.final_ln(x))
        return x


def loss_fn(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1))


# ---------------------------------------------------------------------------------------------


def worker(rank, a, port, queue):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a.pp)
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    model = Stage(a, rank)
    stage = PipelineStage(model, rank, a.pp, torch.device("cpu"))
    sched = Schedule1F1B(stage, a.microbatches, loss_fn=loss_fn)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    losses_per_it, times = [], []
    for it in range(a.iterations):
        t0 = time.perf_counter()
        batch = global_batch(a, it) if (model.first or model.last) else None
        losses = []
        if batch is not None:
            x, y = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
        if model.first and model.last:
            sched.step(x, target=y, losses=losses)
        elif model.first:
            sched.step(x)
        elif model.last:
            sched.step(target=y, losses=losses)
        else:
            sched.step()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        if model.last:
            losses_per_it.append(float(torch.stack([l.detach() for l in losses]).mean()))
    if model.last:
        queue.put({"losses": losses_per_it, "times": times})
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def verify_runfile(a, path):
    """Max |python init - stagescope ParamInitial payload| over every parameter."""
    con = sqlite3.connect(path)
    rows = con.execute(
        "SELECT param, full_shape, shape, partition_dim, payload FROM gradients "
        "WHERE phase LIKE 'param%initial' AND payload IS NOT NULL").fetchall()
    if not rows:
        sys.exit(f"{path}: no ParamInitial payloads (record with --record full)")
    worst, n = 0.0, 0
    for s in range(a.pp):
        for name, (t, kind) in Stage(a, s).named_init().items():
            match = [r for r in rows if r[0] == name]
            if not match:
                sys.exit(f"{path}: no initial value for {name}")
            got = torch.frombuffer(bytearray(match[0][4]), dtype=torch.float32).reshape(t.shape)
            worst = max(worst, float((got - t.detach()).abs().max()))
            n += 1
    print("VERIFY " + json.dumps({"params": n, "max_abs_diff": worst}), flush=True)
    return worst


def main():
    p = argparse.ArgumentParser()
    for k, v in dict(pp=4, layers=4, hidden=32, heads=4, ffn=64, vocab=64, text_len=8,
                     microbatches=8, mbs=2, seed=1234, iterations=10).items():
        p.add_argument("--" + k.replace("_", "-"), type=int, default=v)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--module", default="llm")
    p.add_argument("--verify-runfile")
    a = p.parse_args()
    if a.layers % a.pp:
        sys.exit("layers must divide evenly over pp")
    if a.verify_runfile and verify_runfile(a, a.verify_runfile) != 0.0:
        sys.exit("initial weights differ from the stagescope run file")
    if a.iterations == 0:
        return
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, a, port, queue)) for r in range(a.pp)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join()
    if any(pr.exitcode != 0 for pr in procs):
        sys.exit("a rank failed: exit codes " + str([pr.exitcode for pr in procs]))
    print("RESULT " + json.dumps(queue.get()))


if __name__ == "__main__":
    main()
