#!/usr/bin/env python3
"""Random-layout differential sweep: runs random valid multimodule layouts with
`--record full --reference --check` and reports every run whose check does not pass.

The single-process reference is recorded next to the run and `check` compares every
gathered gradient value and loss to it, so a failure here is an engine defect on a layout
the test suite does not name.  With --recompute, scripts/recompute.py (an independent
PyTorch recomputation written from docs/model.md, docs/recompute.md) also judges every run
file, and a run passes only when both agree.  Layouts vary tp/pp/dp per module, one to three
encoders (fan-in, fan-out, one-to-one), offsets and module order, colocation (--colocate P),
microbatches, micro-batch size, Adam or SGD (with momentum, weight decay), the loss scale and
forward-only runs.  Usage: scripts/layout_sweep.py [--runs N] [--seed S] [--max-ranks R]
[--colocate P] [--recompute] [--keep DIR].  Configs that the validator refuses (exit 2) are
skipped and counted.  Exit 0 when every run passed, 1 otherwise.
"""
import argparse, os, random, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("STAGESCOPE_BIN", os.path.join(ROOT, "build", "default", "app", "stagescope"))
PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
RECOMPUTE = os.path.join(ROOT, "scripts", "recompute.py")


def module(name, kind, tp, pp, dp, offset, rng):
    lines = [f"[[modules]]", f'name = "{name}"', f'kind = "{kind}"', f"tp = {tp}", "cp = 1",
             f"pp = {pp}", f"dp = {dp}", f"offset = {offset}"]
    if pp > 1 and rng.random() < 0.3:  # uneven stages: one stage holds a layer more
        split = [1] * pp
        split[rng.randrange(pp)] = 2
        lines += [f"layers = {pp + 1}", f"stage_layers = {split}"]
    else:
        lines.append(f"layers = {pp * rng.choice([1, 2])}")
    lines += ["hidden = 32", f"heads = {rng.choice([2, 4])}", "ffn = 64"]
    if kind == "encoder":
        lines += [f"patches = {rng.choice([2, 3, 4])}", "patch_dim = 8"]
    else:
        lines += ["vocab = 64", f"text_len = {rng.choice([4, 8])}"]
    return "\n".join(lines)


def colocated_config(rng, max_ranks):
    """Layouts with shared ranks: encoders on one slot, or on the llm's first stage, or both;
    sometimes one more encoder on ranks of its own."""
    llm = dict(tp=rng.choice([1, 2]), pp=rng.choice([1, 2, 3]), dp=1)
    if llm["pp"] == 1:
        llm["dp"] = rng.choice([1, 2])
    # ranks of the llm's first stage: contiguous from its offset when dp is 1 or pp is 1
    slot = llm["tp"] * llm["dp"]
    mode = rng.choice(["encoders", "on_llm", "both"])
    mods, offset = [], 0
    shared = []
    for i in range(rng.choice([2, 3]) if mode != "on_llm" else rng.choice([1, 2])):
        tp = rng.choice([t for t in (1, 2) if slot % t == 0])
        shared.append(dict(tp=tp, pp=1, dp=slot // tp))  # dp > llm dp: a fan-in
    if mode == "encoders":  # the shared encoders on their own slot, llm after them
        enc_off, llm_off = 0, slot
    else:  # the shared encoders on the llm's first stage
        enc_off, llm_off = 0, 0
    blocks = [module("llm", "llm", llm["tp"], llm["pp"], llm["dp"], llm_off, rng)]
    end = llm_off + llm["tp"] * llm["pp"] * llm["dp"]
    for i, e in enumerate(shared):
        blocks.append(module(f"enc{i}", "encoder", e["tp"], e["pp"], e["dp"], enc_off, rng))
    if mode == "both":  # plus an encoder of its own (pp 1 or 2) in front of nothing else
        tp, pp = rng.choice([1, 2]), rng.choice([1, 2])
        blocks.append(module(f"enc{len(shared)}", "encoder", tp, pp, 1, end, rng))
        end += tp * pp
    if end > max_ranks:
        return None, end
    rng.shuffle(blocks)
    return blocks, end


def random_config(rng, max_ranks, colocate=0.0):
    if rng.random() < colocate:
        blocks, offset = colocated_config(rng, max_ranks)
        if blocks is None:
            return None, offset
        return header(rng) + "\n" + "\n\n".join(blocks) + "\n", offset
    return separate_config(rng, max_ranks)


def separate_config(rng, max_ranks):
    n_enc = rng.choice([1, 1, 2, 2, 3])
    llm = dict(tp=rng.choice([1, 2]), pp=rng.choice([1, 2, 3]), dp=rng.choice([1, 2, 2, 4]))
    encs = []
    for i in range(n_enc):
        dp = rng.choice([d for d in (1, 2, 4) if d % llm["dp"] == 0 or llm["dp"] % d == 0])
        encs.append(dict(tp=rng.choice([1, 2]), pp=rng.choice([1, 1, 2]), dp=dp))
    mods = [("llm", "llm", llm)] + [(f"enc{i}", "encoder", e) for i, e in enumerate(encs)]
    rng.shuffle(mods)
    offset, blocks = 0, []
    for name, kind, g in mods:
        blocks.append(module(name, kind, g["tp"], g["pp"], g["dp"], offset, rng))
        offset += g["tp"] * g["pp"] * g["dp"]
    if offset > max_ranks:
        return None, offset
    return header(rng) + "\n" + "\n\n".join(blocks) + "\n", offset


def header(rng):
    m = rng.choice([1, 2, 3, 4, 6])
    forward_only = rng.random() < 0.1
    kind = rng.choice(["sgd", "adam"])
    opt = [f'kind = "{kind}"', f"lr = {rng.choice([0.001, 0.01])}"]
    if kind == "sgd" and rng.random() < 0.5:
        opt.append("momentum = 0.9")
    if rng.random() < 0.25:
        opt.append("weight_decay = 0.01")
    return "\n".join([f"seed = {rng.randrange(1, 10**6)}", "iterations = 2",
                      f"microbatches = {m}", f"micro_batch_size = {rng.choice([1, 2, 4])}",
                      'dtype = "float32"', 'device = "cpu"', 'backend = "gloo"',
                      "timeout_seconds = 120", f"loss_scale = {rng.choice([1.0, 1.0, 4.0, 1024.0])}",
                      f"forward_only = {'true' if forward_only else 'false'}", "", "[optimizer]"]
                     + opt + ["", "[record]", 'level = "full"', ""])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--max-ranks", type=int, default=8)
    ap.add_argument("--keep", default=None)
    ap.add_argument("--colocate", type=float, default=0.0,
                    help="share of layouts whose modules share ranks (0..1)")
    ap.add_argument("--recompute", action="store_true",
                    help="also judge every run file with scripts/recompute.py")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    out = a.keep or tempfile.mkdtemp(prefix="sweep-")
    os.makedirs(out, exist_ok=True)
    done = refused = check_failed = recompute_failed = 0
    failures = []
    while done < a.runs:
        cfg, ranks = random_config(rng, a.max_ranks, a.colocate)
        if cfg is None:
            continue
        n = done + refused
        path = os.path.join(out, f"layout{n}.toml")
        with open(path, "w") as f:
            f.write(cfg)
        db = os.path.join(out, f"layout{n}.db")
        t0 = time.time()
        p = subprocess.run([BIN, "run", path, "--reference", "--check", "-q", "-o", db],
                           capture_output=True, text=True)
        dt = time.time() - t0
        if p.returncode == 2:
            refused += 1
            print(f"refused {path}: {p.stderr.strip().splitlines()[-1] if p.stderr else ''}")
            continue
        done += 1
        status = "ok" if p.returncode == 0 else f"FAIL exit {p.returncode}"
        if p.returncode != 0:
            check_failed += 1
        r = None
        if a.recompute:
            r = subprocess.run([PYTHON, RECOMPUTE, db], capture_output=True, text=True)
            status += " recompute " + ("ok" if r.returncode == 0 else f"FAIL exit {r.returncode}")
            if r.returncode != 0:
                recompute_failed += 1
        print(f"{status:12s} {ranks} ranks {dt:5.1f}s {path}", flush=True)
        if p.returncode != 0 or (r is not None and r.returncode != 0):
            failures.append(path)
            if p.returncode != 0:
                print((p.stdout + p.stderr)[-1500:])
            if r is not None and r.returncode != 0:
                print((r.stdout + r.stderr)[-3000:])
    print(f"{done} runs, {len(failures)} failed (check {check_failed}, recompute "
          f"{recompute_failed if a.recompute else 'not run'}), {refused} refused by the "
          f"validator; seed {a.seed}; files in {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
