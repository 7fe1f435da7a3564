#!/usr/bin/env python3
"""Cell-level fuzzer for run files: each round copies a real run file, changes one cell of one
table (or every row of one column, or deletes one row) through SQLite, and runs the chosen
commands on the copy.  A round is a problem when a command dies of a signal, exits with a code
outside the documented set (0, 1, 2, 10-20), prints `terminate called`/`what():`/an assertion,
writes more than two lines on stderr (gui excepted), runs past --timeout, or changes its input.

It found the viewer crash on a run file whose details could not be read, and (with --show-pass)
the data mutations that check passed and compare called IDENTICAL: copies of a replicated tensor
judged on one copy only, losses never judged against the reference (docs/analysis.md).

Usage: scripts/fuzz_runfile.py STAGESCOPE RUN.db [--rounds N] [--seed S]
           [--commands check,compare,export,gui] [--timeout SECONDS] [--show-pass]
RUN.db is only read; the copies live in a temporary directory this script creates and removes.
Exit 0 when no round had a problem, 1 otherwise.
"""
import argparse, hashlib, os, random, shutil, sqlite3, subprocess, sys, tempfile
from collections import Counter

ALLOWED = {0, 1, 2} | set(range(10, 21))
VALUES = [None, -1, 0, 1, 2, 7, 2**31, 2**62, -2**63, 2**63 - 1, 1e308, -1e308, float("inf"),
          float("nan"), 0.5, -0.0, "", "x", "nan", "[", "[1,2", "{", "\x00", b"", b"\x00" * 3,
          b"\xff" * 17, "9" * 40, "-1", "llm", "[[]]", "[-1]", "[1e9]"]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tables_of(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    cols = {t: [r[1] for r in db.execute(f"PRAGMA table_info('{t}')")] for t in names}
    rows = {t: db.execute(f"SELECT count(*) FROM '{t}'").fetchone()[0] for t in names}
    db.close()
    return [t for t in names if rows[t] and cols[t]], cols, rows


def mutate(path, rnd, tables, cols, rows):
    """One change to the copy at `path`; returns what was done, or None when SQLite refused."""
    t = rnd.choice(tables)
    c = rnd.choice(cols[t])
    v = rnd.choice(VALUES)
    row = rnd.randrange(rows[t])
    pick = f"(SELECT rowid FROM '{t}' LIMIT 1 OFFSET {row})"
    how = rnd.random()
    if how < 0.8:
        sql, args, what = f"UPDATE '{t}' SET \"{c}\"=? WHERE rowid={pick}", (v,), f"{t}.{c} row {row} = {v!r}"
    elif how < 0.9:
        sql, args, what = f"UPDATE '{t}' SET \"{c}\"=?", (v,), f"{t}.{c} every row = {v!r}"
    else:
        sql, args, what = f"DELETE FROM '{t}' WHERE rowid={pick}", (), f"{t} row {row} deleted"
    db = sqlite3.connect(path)
    try:
        db.execute(sql, args)
        db.commit()
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return what


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stagescope")
    ap.add_argument("run")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--commands", default="check,compare,export")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--show-pass", action="store_true", help="print rounds a command passed (exit 0)")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    tables, cols, rows = tables_of(a.run)
    work = tempfile.mkdtemp(prefix="stagescope-fuzz-")
    exits, problems = Counter(), 0
    try:
        for i in range(a.rounds):
            copy = os.path.join(work, "m.db")
            for f in os.listdir(work):
                os.remove(os.path.join(work, f))
            shutil.copy(a.run, copy)
            what = mutate(copy, rnd, tables, cols, rows)
            if what is None:
                continue
            before = digest(copy)
            for cmd in a.commands.split(","):
                args = {"check": ["check", copy],
                        "compare": ["compare", copy, a.run],
                        "export": ["export", copy, "--chrome-trace", os.path.join(work, "t.json")],
                        "gui": ["gui", copy, "--screenshot", os.path.join(work, "s.png"), "--script", "frames 3"]}[cmd]
                pre = ["xvfb-run", "-a", "-s", "-screen 0 1280x800x24"] if cmd == "gui" else []
                try:
                    p = subprocess.run(pre + [a.stagescope] + args, capture_output=True, text=True,
                                       timeout=a.timeout)
                    rc, err = p.returncode, p.stderr
                except subprocess.TimeoutExpired:
                    rc, err = "timeout", ""
                exits[(cmd, rc)] += 1
                lines = [l for l in err.splitlines() if l.strip()]
                problem = None
                if rc == "timeout":
                    problem = f"no end within {a.timeout} s"
                elif rc < 0 or rc not in ALLOWED:
                    problem = f"exit {rc}"
                elif any(k in err for k in ("terminate called", "Assertion", "what():")):
                    problem = "abort text"
                elif len(lines) > 2 and cmd != "gui":
                    problem = f"{len(lines)} lines on stderr"
                if digest(copy) != before:
                    problem = (problem + "; " if problem else "") + "input changed"
                if a.show_pass and rc == 0:
                    print(f"[{i}] {cmd} passed: {what}")
                if problem:
                    problems += 1
                    print(f"[{i}] {cmd}: {problem}: {what}\n    " + "\n    ".join(lines[-4:]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{a.rounds} rounds, {problems} problems; exits: " +
          ", ".join(f"{c} {r}: {n}" for (c, r), n in sorted(exits.items(), key=str)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
