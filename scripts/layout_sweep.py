#!/usr/bin/env python3
"""Random-layout differential sweep: runs random multimodule layouts that `plan` accepts with
`--record full --reference --check` and reports every run whose verdicts do not agree.

The single-process reference is recorded next to the run and `check` compares every gathered
gradient value and loss to it, so a check failure is an engine defect on a layout the test
suite does not name.  With --recompute, scripts/recompute.py (an independent PyTorch
recomputation written from docs/model.md, docs/recompute.md) also judges every run file: a run
passes only when check passes and recompute says MATCH, or, where recompute cannot judge the
file (a record filter that hides what it needs), when it says so in one line (exit 3) instead
of MISMATCH.  check must pass exactly when recompute says MATCH (bfloat16 runs too: recompute
judges them with its own bfloat16 rule, docs/recompute.md).

What the generator varies (everything `plan` accepts, within small sizes: hidden <= 32):
  * up to --max-ranks ranks (default 16); tp 1-4 (3 included), pp 1-4 with uneven
    `stage_layers`, dp 1-6 (3, 5, 6 included);
  * zero to four encoders with their own grids; every encoder dp that divides or is divided by
    the llm's (fan-in 3->1, 4->2, 6->2, 6->3 ..., fan-out 1->3, 2->6 ..., one-to-one) with the
    micro-batch size made to fit;
  * colocation (--colocate P): encoders sharing a slot, encoders on the llm's first stage, an
    encoder pp 2-3 whose last stage is the llm's first stage, plus encoders of their own;
  * microbatches 1-7 (not divisible by the number of stages), 1-3 iterations, Adam or SGD with
    momentum, weight decay, lr, betas, eps; the loss scale; forward-only runs;
  * dtype float32 or bfloat16 (--bf16 P); `[record]` filters on iterations, modules, ranks
    (--filters P);
  * the multi-host path (--multihost P): one `stagescope worker` per rank under the
    RANK/WORLD_SIZE/MASTER_ADDR rendezvous, as two "hosts" on this machine (ranks advertise
    127.0.0.1 and 127.0.0.2 to their Gloo peers), then `stagescope merge --config` and `check`.

A refused config must be refused with one line `error: ...` and exit 2 (counted; anything else
is a failure).  Prints one line per layout with its categories and a table of layout counts by
category at the end.  Exit 0 when every run passed, 1 otherwise.

Usage: scripts/layout_sweep.py [--runs N] [--seed S] [--max-ranks R] [--colocate P] [--bf16 P]
       [--filters P] [--multihost P] [--recompute] [--keep DIR] [--quiet]
"""
import argparse, math, os, random, socket, subprocess, sys, tempfile, time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("STAGESCOPE_BIN", os.path.join(ROOT, "build", "default", "app", "stagescope"))
PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
RECOMPUTE = os.path.join(ROOT, "scripts", "recompute.py")
# recompute's tensors are tiny: one thread each keeps the shared machine free.
CHILD_ENV = dict(os.environ, OMP_NUM_THREADS="1")


# ---- layouts ------------------------------------------------------------------------------

def widths(tp, rng):
    """(hidden, heads, ffn) that a tp accepts: heads and ffn multiples of tp, hidden of heads."""
    if tp == 3:
        return rng.choice([12, 24]), rng.choice([3, 6]) if rng.random() < 0.5 else 3, \
            rng.choice([24, 48])
    if tp == 4:
        return rng.choice([16, 32]), rng.choice([4, 8]), rng.choice([32, 64])
    if tp == 2:
        return rng.choice([16, 32]), rng.choice([2, 4]), rng.choice([32, 64])
    hidden = rng.choice([8, 12, 16, 24, 32])
    heads = rng.choice([h for h in (1, 2, 3, 4) if hidden % h == 0])
    return hidden, heads, rng.choice([16, 32, 48, 64])


def module(name, kind, g, offset, rng, tags):
    tp, pp, dp = g["tp"], g["pp"], g["dp"]
    lines = ["[[modules]]", f'name = "{name}"', f'kind = "{kind}"', f"tp = {tp}", "cp = 1",
             f"pp = {pp}", f"dp = {dp}", f"offset = {offset}"]
    if pp > 1 and rng.random() < 0.4:  # uneven stages
        split = [rng.choice([1, 1, 2, 3]) for _ in range(pp)]
        if len(set(split)) == 1:
            split[rng.randrange(pp)] += 1
        lines += [f"layers = {sum(split)}", f"stage_layers = {split}"]
        tags.add("uneven stage_layers")
    else:
        lines.append(f"layers = {pp * rng.choice([1, 1, 2])}")
    hidden, heads, ffn = widths(tp, rng)
    lines += [f"hidden = {hidden}", f"heads = {heads}", f"ffn = {ffn}"]
    if kind == "encoder":
        lines += [f"patches = {rng.choice([1, 2, 3, 5])}", f"patch_dim = {rng.choice([1, 3, 8])}"]
    else:
        lines += [f"vocab = {rng.choice([2, 17, 64])}", f"text_len = {rng.choice([1, 3, 4, 8])}"]
    return "\n".join(lines)


def compatible_dp(llm_dp, rng, choices=(1, 2, 3, 4, 5, 6, 8)):
    return rng.choice([d for d in choices if d % llm_dp == 0 or llm_dp % d == 0])


def size(g):
    return g["tp"] * g["pp"] * g["dp"]


def separate_layout(rng, max_ranks):
    """Modules on ranks of their own, in random order: (name, kind, grid, offset) list."""
    llm = dict(tp=rng.choice([1, 1, 2, 2, 3, 4]), pp=rng.choice([1, 1, 2, 2, 3, 4]),
               dp=rng.choice([1, 1, 2, 2, 3, 4, 5, 6]))
    mods = [("llm", "llm", llm)]
    for i in range(rng.choice([0, 1, 1, 2, 2, 3, 4])):
        mods.append((f"enc{i}", "encoder", dict(tp=rng.choice([1, 1, 2, 3, 4]),
                                                pp=rng.choice([1, 1, 2, 3]),
                                                dp=compatible_dp(llm["dp"], rng))))
    rng.shuffle(mods)
    out, offset = [], 0
    for name, kind, g in mods:
        out.append((name, kind, g, offset))
        offset += size(g)
    return out, offset


def colocated_layout(rng, max_ranks):
    """Layouts with shared ranks (docs/config.md, "Colocated modules"): encoders sharing a slot
    of their own, encoders on the llm's first stage, an encoder pp>1 whose last stage is the
    llm's first stage, and sometimes one more encoder on ranks of its own."""
    mode = rng.choice(["encoders", "on_llm", "pp_into_llm", "both"])
    llm = dict(tp=rng.choice([1, 2, 3]), pp=rng.choice([1, 2, 3]), dp=1)
    if llm["pp"] == 1:
        llm["dp"] = rng.choice([1, 2, 3])
    slot = llm["tp"] * llm["dp"]  # ranks of the llm's first stage (contiguous: dp 1 or pp 1)
    if mode == "pp_into_llm" and slot > 4:  # that encoder's tp is the slot: at most 4
        mode = "on_llm"
    out = []
    if mode == "pp_into_llm":  # enc tp=slot, pp 2-3, dp 1; its last stage on llm stage 0
        pp = rng.choice([2, 3])
        out.append(("enc0", "encoder", dict(tp=slot, pp=pp, dp=1), 0))
        llm_off = (pp - 1) * slot
        if rng.random() < 0.5:  # and one more pp 1 encoder on the llm's first stage
            tp = rng.choice([t for t in (1, 2, 3, 4) if slot % t == 0])
            out.append(("enc1", "encoder", dict(tp=tp, pp=1, dp=slot // tp), llm_off))
    else:
        n = rng.choice([1, 2]) if mode == "on_llm" else rng.choice([2, 3])
        for i in range(n):
            tp = rng.choice([t for t in (1, 2, 3, 4) if slot % t == 0])
            out.append((f"enc{i}", "encoder", dict(tp=tp, pp=1, dp=slot // tp), 0))
        llm_off = slot if mode == "encoders" else 0
    out.append(("llm", "llm", llm, llm_off))
    end = max(off + size(g) for _, _, g, off in out)
    if mode == "both":  # plus an encoder of its own
        g = dict(tp=rng.choice([1, 2]), pp=rng.choice([1, 2]), dp=compatible_dp(llm["dp"], rng,
                                                                               (1, 2, 3)))
        out.append((f"enc{len(out) - 1}", "encoder", g, end))
        end += size(g)
    rng.shuffle(out)
    return out, end, mode


def micro_batch_size(rng, layout):
    """The smallest micro-batch size that makes every encoder's mbs*llm_dp/dp an integer,
    times 1 or 2."""
    dp_l = next(g["dp"] for _, kind, g, _ in layout if kind == "llm")
    need = 1
    for _, kind, g, _ in layout:
        if kind == "encoder":
            q = g["dp"] // math.gcd(g["dp"], dp_l)
            need = need * q // math.gcd(need, q)
    return need * rng.choice([1, 1, 2])


def header(rng, mbs, bf16, tags):
    m = rng.choice([1, 2, 3, 4, 5, 7])
    forward_only = rng.random() < 0.1
    kind = rng.choice(["sgd", "adam"])
    opt = [f'kind = "{kind}"', f"lr = {rng.choice([0.001, 0.01, 0.05])}"]
    if kind == "sgd" and rng.random() < 0.5:
        opt.append(f"momentum = {rng.choice([0.5, 0.9])}")
        tags.add("sgd momentum")
    if kind == "adam" and rng.random() < 0.3:
        opt += [f"beta1 = {rng.choice([0.0, 0.5])}", f"beta2 = {rng.choice([0.9, 0.99])}",
                f"eps = {rng.choice([1e-6, 1e-3])}"]
        tags.add("adam betas/eps")
    if rng.random() < 0.3:
        opt.append(f"weight_decay = {rng.choice([0.01, 0.1])}")
        tags.add("weight decay")
    iterations = rng.choice([1, 2, 2, 3])
    scale = rng.choice([1.0, 1.0, 0.5, 4.0, 1024.0])
    dtype = "bfloat16" if bf16 else "float32"
    tags.add(f"dtype {dtype}")
    tags.add("forward-only" if forward_only else f"optimizer {kind}")
    if scale != 1.0 and not forward_only:
        tags.add("loss scale != 1")
    if iterations >= 3:
        tags.add("3 iterations")
    tags.add(f"microbatches {m}")
    return m, iterations, "\n".join(
        [f"seed = {rng.randrange(1, 10**6)}", f"iterations = {iterations}",
         f"microbatches = {m}", f"micro_batch_size = {mbs}", f'dtype = "{dtype}"',
         'device = "cpu"', 'backend = "gloo"', "timeout_seconds = 300",
         f"loss_scale = {scale}", f"forward_only = {'true' if forward_only else 'false'}", "",
         "[optimizer]"] + opt)


def record_table(rng, filters, iterations, layout, world, tags):
    lines = ["[record]", 'level = "full"']
    if rng.random() < filters:
        which = rng.choice(["iterations", "modules", "ranks"])
        tags.add(f"record.{which} filter")
        if which == "iterations":
            its = sorted(rng.sample(range(iterations), rng.randint(1, iterations)))
            lines.append(f"iterations = {its}")
        elif which == "modules":
            names = [n for n, _, _, _ in layout]
            pick = sorted(rng.sample(names, rng.randint(1, len(names))))
            lines.append("modules = [" + ", ".join(f'"{n}"' for n in pick) + "]")
        else:
            pick = sorted(rng.sample(range(world), rng.randint(1, world)))
            lines.append(f"ranks = {pick}")
    return "\n".join(lines)


def random_config(rng, max_ranks, colocate=0.0, bf16=0.0, filters=0.0):
    """(config text, ranks, tags) of one random layout, or (None, ranks, None) when it holds
    more than max_ranks ranks."""
    tags = set()
    if rng.random() < colocate:
        layout, world, mode = colocated_layout(rng, max_ranks)
        tags.add(f"colocated {mode}")
    else:
        layout, world = separate_layout(rng, max_ranks)
        tags.add("separate")
    if world > max_ranks:
        return None, world, None
    llm = next(g for _, kind, g, _ in layout if kind == "llm")
    encs = [g for _, kind, g, _ in layout if kind == "encoder"]
    tags.add(f"{len(encs)} encoders" if len(encs) != 1 else "1 encoder")
    tags.add("ranks 9-16" if world > 8 else "ranks 1-8")
    for g in [llm] + encs:
        if g["dp"] in (3, 5, 6):
            tags.add("dp 3/5/6")
        if g["tp"] == 3:
            tags.add("tp 3")
        if g["tp"] == 4:
            tags.add("tp 4")
    if llm["pp"] >= 3:
        tags.add("llm pp >= 3")
    if any(g["pp"] > 1 for g in encs):
        tags.add("encoder pp > 1")
    for g in encs:
        if g["dp"] > llm["dp"]:
            tags.add(f"fan-in {g['dp']}->{llm['dp']}")
        elif g["dp"] < llm["dp"]:
            tags.add(f"fan-out {g['dp']}->{llm['dp']}")
    mbs = micro_batch_size(rng, layout)
    if mbs == 1:
        tags.add("micro_batch_size 1")
    m, iterations, head = header(rng, mbs, rng.random() < bf16, tags)
    blocks = [module(n, k, g, off, rng, tags) for n, k, g, off in layout]
    text = (head + "\n\n" + record_table(rng, filters, iterations, layout, world, tags) + "\n\n"
            + "\n\n".join(blocks) + "\n")
    return text, world, tags


# ---- running ------------------------------------------------------------------------------

def one_error_line(p):
    """A refusal is exactly one line `error: ...` on stderr and nothing on stdout."""
    lines = p.stderr.splitlines()
    return len(lines) == 1 and lines[0].startswith("error: ") and not p.stdout.strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_multihost(cfg, db, world, timeout=600):
    """One `stagescope worker` per rank, ranks 0..world/2-1 on "host" 127.0.0.1 and the rest on
    127.0.0.2 (each advertises its address to its Gloo peers; LOCAL_RANK counts per host), then
    `stagescope merge --config` and `stagescope check`.  Returns (rc, output) of the first step
    that failed, or of check."""
    port = free_port()
    half = (world + 1) // 2
    procs = []
    for r in range(world):
        host = "127.0.0.1" if r < half else "127.0.0.2"
        env = dict(CHILD_ENV, RANK=str(r), WORLD_SIZE=str(world),
                   LOCAL_RANK=str(r if r < half else r - half), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), STAGESCOPE_GLOO_HOST=host,
                   STAGESCOPE_RUN_ID=os.path.basename(db))
        procs.append(subprocess.Popen([BIN, "worker", cfg, "-o", db], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    out, rc = "", 0
    for r, p in enumerate(procs):
        try:
            o, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            o, _ = p.communicate()
            o += f"\n(rank {r} still running after {timeout} s: killed)"
        out += o
        rc = rc or p.returncode
    if rc != 0:
        return rc, "workers: " + out
    shards = [f"{db}.rank{r}.shard" for r in range(world)]
    m = subprocess.run([BIN, "merge", db] + shards + ["--config", cfg], capture_output=True,
                       text=True)
    if m.returncode != 0:
        return m.returncode, "merge: " + m.stdout + m.stderr
    c = subprocess.run([BIN, "check", db], capture_output=True, text=True)
    return c.returncode, c.stdout + c.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--max-ranks", type=int, default=16)
    ap.add_argument("--keep", default=None)
    ap.add_argument("--colocate", type=float, default=0.35,
                    help="share of layouts whose modules share ranks (0..1)")
    ap.add_argument("--bf16", type=float, default=0.0, help="share of bfloat16 runs (0..1)")
    ap.add_argument("--filters", type=float, default=0.0,
                    help="share of runs with a [record] filter (0..1)")
    ap.add_argument("--multihost", type=float, default=0.0,
                    help="share of runs started as workers on two local 'hosts' (0..1)")
    ap.add_argument("--recompute", action="store_true",
                    help="also judge every run file with scripts/recompute.py")
    ap.add_argument("--quiet", action="store_true", help="print failures and the totals only")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    out = a.keep or tempfile.mkdtemp(prefix="sweep-")
    os.makedirs(out, exist_ok=True)
    done = refused = 0
    failures = []
    counts, matched = Counter(), Counter()
    cannot = Counter()
    while done < a.runs:
        cfg, ranks, tags = random_config(rng, a.max_ranks, a.colocate, a.bf16, a.filters)
        if cfg is None:
            continue
        n = done + refused
        path = os.path.join(out, f"layout{n}.toml")
        with open(path, "w") as f:
            f.write(cfg)
        db = os.path.join(out, f"layout{n}.db")
        t0 = time.time()
        multihost = rng.random() < a.multihost
        p = subprocess.run([BIN, "plan", path], capture_output=True, text=True)
        if p.returncode != 0:
            refused += 1
            ok = p.returncode == 2 and one_error_line(p)
            print(f"refused {path}: {p.stderr.strip()}" if ok else
                  f"FAIL refusal of {path} is not one error line with exit 2 (exit "
                  f"{p.returncode}): {(p.stdout + p.stderr)[-1500:]}", flush=True)
            if not ok:
                failures.append(path)
            continue
        if multihost:
            tags.add("multi-host workers")
            rc, text = run_multihost(path, db, ranks)
        else:
            r = subprocess.run([BIN, "run", path, "--reference", "--check", "-q", "-o", db],
                               capture_output=True, text=True, env=CHILD_ENV)
            rc, text = r.returncode, r.stdout + r.stderr
        dt = time.time() - t0
        done += 1
        problems = []
        if rc != 0:
            problems.append(f"check exit {rc}")
        verdict = "not run"
        r = None
        if a.recompute and os.path.exists(db):
            r = subprocess.run([PYTHON, RECOMPUTE, db], capture_output=True, text=True,
                               env=CHILD_ENV)
            verdict = {0: "MATCH", 1: "MISMATCH", 3: "cannot"}.get(r.returncode,
                                                                   f"exit {r.returncode}")
            if r.returncode == 3:
                why = r.stderr.strip()
                cannot[why.split(":")[-1].strip()[:80]] += 1
                if len(r.stderr.splitlines()) != 1:
                    problems.append("recompute's cannot-recompute message is not one line")
                if not any("filter" in t for t in tags):
                    problems.append("recompute cannot judge an unfiltered run")
            elif r.returncode != 0:
                problems.append(f"recompute {verdict}")
            # check passes exactly when recompute says MATCH (for a run recompute can judge)
            if r.returncode in (0, 1) and (rc == 0) != (r.returncode == 0):
                problems.append(f"check exit {rc} but recompute {verdict}")
        for t in tags:
            counts[t] += 1
            if not problems:
                matched[t] += 1
        counts["all"] += 1
        matched["all"] += not problems
        line = (f"{'ok' if not problems else 'FAIL ' + '; '.join(problems)}: {ranks} ranks "
                f"{dt:5.1f}s recompute {verdict} {path} [{', '.join(sorted(tags))}]")
        if problems or not a.quiet:
            print(line, flush=True)
        if problems:
            failures.append(path)
            print(text[-1500:])
            if r is not None:
                print((r.stdout + r.stderr)[-3000:])
    print(f"\n{'category':34s} {'layouts':>7s} {'passed':>7s}")
    for t in sorted(counts, key=lambda t: (t != "all", t)):
        print(f"{t:34s} {counts[t]:7d} {matched[t]:7d}")
    for why, k in cannot.most_common():
        print(f"recompute cannot judge ({k}): {why}")
    print(f"{done} runs, {len(failures)} failed, {refused} refused by plan with one error line; "
          f"seed {a.seed}; files in {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
