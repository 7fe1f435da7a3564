#!/usr/bin/env python3
"""The best PyTorch's own pipelining can do for stagescope's default encoder -> LLM layout, for
the engine-vs-PyTorch multimodule benchmark (bench part 8).

stagescope's default layout runs a vision encoder (tp 2, dp 2) on ranks 0-3 feeding a language
model (tp 2, pp 2) on ranks 4-7: two encoder replicas fan in to one LLM pipeline, each module
tensor-parallel.  torch.distributed.pipelining cannot express that: a PipelineStage is one
rank's part of one linear chain, with no tensor parallelism inside a stage and no fan-in of
replicas into a stage.  What it can run is the same three global stages as a linear chain on
three processes -- encoder (all its layers, then the projector) -> LLM stage 0 (encoder tokens
prepended to the text embeddings) -> LLM stage 1 (the loss) -- with Schedule1F1B or
ScheduleGPipe over the same microbatches.  That is what this script runs, with stagescope's
layout-independent initial weights and data (core/engine/Init.cpp), Gloo, one intra-op thread
per process, Adam.  The last rank prints "RESULT {losses, times}".

Tokens: stagescope's LLM first stage reads its microbatch's tokens itself; a PipelineStage only
receives what the previous stage sends, so stage 1 holds the iteration's token batch and takes
microbatch j's rows for its j-th forward (forwards run in microbatch order in both schedules).
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_pipeline_1f1b import (BIAS, EMBEDDING, LINEAR, NORM_BIAS, NORM_WEIGHT, POSITION,  # noqa: E402
                                 free_port, generator_for, initial_full, loss_fn, sample_tokens)


def sample_patches(seed, iteration, sample, encoder, patches, patch_dim):
    g = generator_for(f"{seed}/data/{iteration}/{sample}/patches/{encoder}")
    return torch.normal(0.0, 1.0, size=(patches, patch_dim), generator=g, dtype=torch.float32)


class Block(nn.Module):
    """Pre-LN block as StageModel::block; causal mask for the LLM only (batch-first)."""

    def __init__(self, h, heads, f, causal):
        super().__init__()
        self.heads, self.dh, self.causal = heads, h // heads, causal
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
        if self.causal:
            mask = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        ctx = torch.matmul(torch.softmax(scores, -1), v)
        return self.o(ctx.permute(0, 2, 1, 3).reshape(B, S, self.heads * self.dh))

    def forward(self, x):
        y = x + self.attention(self.ln1(x))
        return y + self.fc2(F.gelu(self.fc1(self.ln2(y))))


def block_init(prefix, b):
    out = {prefix + "ln1.weight": (b.ln1.weight, NORM_WEIGHT), prefix + "ln1.bias": (b.ln1.bias, NORM_BIAS)}
    for n in ("q", "k", "v", "o"):
        lin = getattr(b, n)
        out[prefix + f"attn.{n}.weight"] = (lin.weight, LINEAR)
        out[prefix + f"attn.{n}.bias"] = (lin.bias, BIAS)
    out.update({prefix + "ln2.weight": (b.ln2.weight, NORM_WEIGHT), prefix + "ln2.bias": (b.ln2.bias, NORM_BIAS),
                prefix + "mlp.fc1.weight": (b.fc1.weight, LINEAR), prefix + "mlp.fc1.bias": (b.fc1.bias, BIAS),
                prefix + "mlp.fc2.weight": (b.fc2.weight, LINEAR), prefix + "mlp.fc2.bias": (b.fc2.bias, BIAS)})
    return out


class Encoder(nn.Module):
    """Global stage 0: patches [B, P, d] -> projected encoder tokens [B, P, H_llm]."""

    def __init__(self, a):
        super().__init__()
        h = a.enc_hidden
        self.patch_embed = nn.Linear(a.patch_dim, h)
        self.pos_embed = nn.Parameter(torch.empty(a.patches, h))
        self.blocks = nn.ModuleList(Block(h, a.enc_heads, a.enc_ffn, False) for _ in range(a.enc_layers))
        self.final_ln = nn.LayerNorm(h, eps=1e-5)
        self.projector = nn.Linear(h, a.hidden)
        m = a.encoder
        init = {f"{m}.patch_embed.weight": (self.patch_embed.weight, LINEAR),
                f"{m}.patch_embed.bias": (self.patch_embed.bias, BIAS),
                f"{m}.pos_embed": (self.pos_embed, POSITION),
                f"{m}.final_ln.weight": (self.final_ln.weight, NORM_WEIGHT),
                f"{m}.final_ln.bias": (self.final_ln.bias, NORM_BIAS),
                f"{m}.projector.weight": (self.projector.weight, LINEAR),
                f"{m}.projector.bias": (self.projector.bias, BIAS)}
        for l, b in enumerate(self.blocks):
            init.update(block_init(f"{m}.layers.{l}.", b))
        load(a, init)

    def forward(self, patches):
        x = self.patch_embed(patches) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        return self.projector(self.final_ln(x))


class LlmStage(nn.Module):
    def __init__(self, a, stage):
        super().__init__()
        self.first, self.last = stage == 0, stage == a.llm_pp - 1
        per = a.layers // a.llm_pp
        ids = list(range(stage * per, (stage + 1) * per))
        m = a.module
        init = {}
        if self.first:
            self.tok_embed = nn.Parameter(torch.empty(a.vocab, a.hidden))
            self.pos_embed = nn.Parameter(torch.empty(a.patches + a.text_len, a.hidden))
            init[f"{m}.tok_embed"] = (self.tok_embed, EMBEDDING)
            init[f"{m}.pos_embed"] = (self.pos_embed, POSITION)
        self.blocks = nn.ModuleList(Block(a.hidden, a.heads, a.ffn, True) for _ in ids)
        for l, b in zip(ids, self.blocks):
            init.update(block_init(f"{m}.layers.{l}.", b))
        if self.last:
            self.final_ln = nn.LayerNorm(a.hidden, eps=1e-5)
            self.head = nn.Linear(a.hidden, a.vocab, bias=False)
            init[f"{m}.final_ln.weight"] = (self.final_ln.weight, NORM_WEIGHT)
            init[f"{m}.final_ln.bias"] = (self.final_ln.bias, NORM_BIAS)
            init[f"{m}.head.weight"] = (self.head.weight, LINEAR)
        load(a, init)
        self.text_len, self.mbs = a.text_len, a.mbs
        self.tokens, self.next_mb = None, 0  # the iteration's inputs (first stage)

    def forward(self, x):
        if self.first:
            if not torch.is_grad_enabled():  # the stage's shape inference (zeros, no_grad)
                tok = torch.zeros(x.shape[0], self.text_len, dtype=torch.long, device=x.device)
            else:
                j = self.next_mb
                self.next_mb += 1
                tok = self.tokens[j * self.mbs:(j + 1) * self.mbs]
            x = torch.cat([x, F.embedding(tok, self.tok_embed)], 1) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        if self.last:
            x = self.head(self.final_ln(x)[:, -self.text_len:])
        return x


def load(a, init):
    with torch.no_grad():
        for name, (t, kind) in init.items():
            t.copy_(initial_full(a.seed, name, list(t.shape), kind))


def worker(rank, a, port, queue):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    world = 1 + a.llm_pp
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    model = Encoder(a) if rank == 0 else LlmStage(a, rank - 1)
    stage = PipelineStage(model, rank, world, torch.device("cpu"))
    kind = Schedule1F1B if a.schedule == "1f1b" else ScheduleGPipe
    sched = kind(stage, a.microbatches, loss_fn=loss_fn)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    losses_per_it, times = [], []
    n = a.microbatches * a.mbs
    for it in range(a.iterations):
        t0 = time.perf_counter()
        losses = []
        if rank == 0:
            patches = torch.stack([sample_patches(a.seed, it, i, a.encoder, a.patches, a.patch_dim) for i in range(n)])
            sched.step(patches)
        else:
            batch = torch.stack([sample_tokens(a.seed, it, i, a.text_len, a.vocab) for i in range(n)])
            if model.first:
                model.tokens, model.next_mb = batch[:, :-1].contiguous(), 0
            if model.last:
                sched.step(target=batch[:, 1:].contiguous(), losses=losses)
            else:
                sched.step()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        if rank == world - 1:
            losses_per_it.append(float(torch.stack([l.detach() for l in losses]).mean()))
    if rank == world - 1:
        queue.put({"losses": losses_per_it, "times": times})
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    # Defaults: assets/configs/default.toml's model.
    for k, v in dict(layers=4, hidden=32, heads=4, ffn=64, vocab=64, text_len=8, llm_pp=2,
                     enc_layers=2, enc_hidden=32, enc_heads=4, enc_ffn=64, patches=4, patch_dim=8,
                     microbatches=4, mbs=2, seed=1234, iterations=10).items():
        p.add_argument("--" + k.replace("_", "-"), type=int, default=v)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--module", default="llm")
    p.add_argument("--encoder", default="vision")
    p.add_argument("--schedule", choices=["1f1b", "gpipe"], default="1f1b")
    a = p.parse_args()
    if a.layers % a.llm_pp:
        sys.exit("layers must divide evenly over llm_pp")
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, a, port, queue)) for r in range(1 + a.llm_pp)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join()
    if any(pr.exitcode != 0 for pr in procs):
        sys.exit("a rank failed: exit codes " + str([pr.exitcode for pr in procs]))
    print("RESULT " + json.dumps(queue.get()))


if __name__ == "__main__":
    main()
