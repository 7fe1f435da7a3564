"""Every fenced block of README.md and docs/*.md executed as printed.

Usage: run_doc_blocks.py REPO BINDIR PYTHON [DOC...]   (DOC relative to REPO; default: all)

Each document runs in a fresh temporary directory that holds what a clone holds there (links
to REPO's assets/, tests/, scripts/, docs/, .venv and build/default/app/stagescope, which
points at BINDIR's), plus an empty runs/; PATH starts with a bin/ holding BINDIR's stagescope,
stagescope-engine and stagescope-gui.  Blocks run in the order printed, so a later block sees
the runs an earlier one made.

What a block is, by its fence's language and the HTML comment lines right above it:

  ```sh / ```console / no language, with lines starting "$ "   a transcript: each "$ " command
        (continued by a trailing backslash) runs with `sh -c`; the lines after it, up to the
        next "$ ", are its expected output (stdout and stderr together).  A command must exit
        0 unless the next command is `echo $?`, whose printed number is then its exit code.
  ```sh / ```bash without "$ "      a script, run with `sh -e`
  ```python                         run with PYTHON in the directory
  ```sql                            run by sqlite3 against the run named by <!-- db: PATH -->
  ```text, ```toml, ```json         not commands (quoted output, diagrams, formulas, config
        fragments); a ```text block right after a script, Python or SQL block (only blank lines
        between) is that block's expected output; <!-- file: PATH --> before a ```toml block
        writes it to PATH for the blocks after it.
  anything else                     must carry <!-- not run: REASON --> (printed), else FAIL.

Markers (HTML comments on the lines right above a fence):
  <!-- not run: REASON -->          skipped, REASON printed (GUI windows, torchrun recipes run
                                    by tests/debug/doc_recipes.sh, Megatron by capture.*)
  <!-- needs: MODULE[,MODULE] -->   a Python block that needs modules the bootstrap does not
                                    install: SKIP, saying so, when PYTHON cannot import them
  <!-- normalise: NAME... -->       the named placeholders below are applied to both the
                                    expected and the actual output before comparing
  <!-- db: PATH -->                 the run file of the SQL blocks from here on
  <!-- file: PATH -->               see above

Comparing output: strict, line by line (trailing spaces ignored), except that a line "..."
stands for any number of lines and "…" inside a line for any text within it (the tools
themselves abridge long findings with " …").  Normalisations (only where marked):
  times    a number followed by a unit of time (ms, s, µs)   -> <time>
  bubble   a measured percentage followed by " / "           -> <pct> /
  memory   the memory this machine has available             -> <mem> available
Every relative link must resolve inside the repository.
Exit 0 when every block ran as printed; 1 on the first document with a failing block (every
failure of that document is listed)."""

import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

NORMALISE = {
    "times": (re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|s|µs)\b"), "<time>"),
    "bubble": (re.compile(r"\b\d+(?:\.\d+)?% / "), "<pct> / "),
    "memory": (re.compile(r"\b[\d.]+ [KMGT]?B available"), "<mem> available"),
}
NOT_CODE = {"text", "toml", "json"}
TIMEOUT = 180


class Block:
    def __init__(self, doc, line, lang, text, markers):
        self.doc, self.line, self.lang, self.text, self.markers = doc, line, lang, text, markers

    def marker(self, name):
        return self.markers.get(name)

    def where(self):
        return f"{self.doc}:{self.line}"


def blocks(doc, path):
    """The fenced blocks of a Markdown file, with the marker comments right above each."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^( *)(```+)([A-Za-z0-9_-]*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3)
        markers, j = {}, i - 1
        while j >= 0 and re.match(r"^\s*<!--.*-->\s*$", lines[j]):
            mm = re.match(r"^\s*<!--\s*([a-z ]+?)\s*:\s*(.*?)\s*-->\s*$", lines[j])
            if mm:
                markers[mm.group(1)] = mm.group(2)
            j -= 1
        body, k = [], i + 1
        while k < len(lines) and not re.match(r"^ *" + fence + r"\s*$", lines[k]):
            body.append(lines[k][indent:] if lines[k][:indent].strip() == "" else lines[k])
            k += 1
        out.append(Block(doc, i + 1, lang, "\n".join(body), markers))
        out[-1].end = k + 1
        i = k + 1
    # a ```text block right after a runnable block (only blank lines between) is its output
    for a, b in zip(out, out[1:]):
        if b.lang == "text" and a.lang in ("sh", "bash", "python", "sql") and not any(
                l.startswith("$ ") for l in a.text.split("\n")):
            src = open(path, encoding="utf-8").read().split("\n")[a.end:b.line - 1]
            if all(s.strip() == "" or re.match(r"^\s*<!--.*-->\s*$", s) for s in src):
                a.expected, b.is_output = b, True
    return out


def normalise(text, names):
    for n in names:
        rx, rep = NORMALISE[n]
        text = rx.sub(rep, text)
    return text


# A line PyTorch's C++ logger writes on a rank's stderr about the machine, not about the run
# ("[rank 0] [W1204 03:35:38.476 socket.cpp:207] [c10d] The hostname of the client socket
# cannot be retrieved. err=-3" when a name lookup fails under load): never part of a quoted
# output, and left out of the comparison wherever it appears.
C10_LOG_LINE = re.compile(r"^(\[rank \d+\] )?\[[WE]\d{4} [0-9:.]+ [^\]]+\] \[c10d\]")


def matches(expected, actual, names):
    """Strict comparison with the two wildcards ('...' line, '…' in a line)."""
    exp = [l.rstrip() for l in normalise(expected, names).strip("\n").split("\n")]
    act = [l.rstrip() for l in normalise(actual, names).replace("\r\n", "\n").strip("\n").split("\n")
           if not C10_LOG_LINE.match(l)]
    pat = ""
    for l in exp:
        if l.strip() in ("...", "…"):
            pat += r"(?:[^\n]*\n)*?"
        else:
            pat += "".join("[^\\n]*" if c == "…" else re.escape(c) for c in l) + r"\n"
    if re.fullmatch(pat, "\n".join(act) + "\n"):
        return None
    return "\n".join(difflib.unified_diff(exp, act, "printed", "actual", lineterm="", n=2))


def transcript(text):
    """[(command, expected output)] of a '$ ' transcript."""
    steps, cmd, outl, cont = [], None, [], False
    for l in text.split("\n"):
        if cont:
            cmd += "\n" + l
            cont = l.endswith("\\")
        elif l.startswith("$ "):
            if cmd is not None:
                steps.append((cmd, "\n".join(outl)))
            cmd, outl, cont = l[2:], [], l.endswith("\\")
        elif cmd is not None:
            outl.append(l)
    if cmd is not None:
        steps.append((cmd, "\n".join(outl)))
    return steps


def sandbox(repo, bindir, python):
    work = tempfile.mkdtemp(prefix="stagescope-docs-")
    for name in ("assets", "tests", "scripts", "docs", ".venv"):
        if os.path.exists(os.path.join(repo, name)):
            os.symlink(os.path.join(repo, name), os.path.join(work, name))
    venv = os.path.dirname(os.path.dirname(python))  # a checkout without .venv: PYTHON's own
    if not os.path.exists(os.path.join(work, ".venv")) and os.path.exists(os.path.join(venv, "pyvenv.cfg")):
        os.symlink(venv, os.path.join(work, ".venv"))
    os.makedirs(os.path.join(work, "build", "default", "app"))
    os.makedirs(os.path.join(work, "bin"))
    os.makedirs(os.path.join(work, "runs"))
    for exe in ("stagescope", "stagescope-engine", "stagescope-gui"):
        src = os.path.join(bindir, exe)
        if os.path.exists(src):
            os.symlink(src, os.path.join(work, "bin", exe))
            os.symlink(src, os.path.join(work, "build", "default", "app", exe))
    env = dict(os.environ, PATH=os.path.join(work, "bin") + ":" + os.environ.get("PATH", ""))
    env.pop("DISPLAY", None)
    return work, env


def run(argv, work, env, stdin=None):
    r = subprocess.run(argv, cwd=work, env=env, input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT)
    return r.returncode, r.stdout


def links(repo, doc):
    """Relative links that do not resolve inside the repository."""
    out = []
    for m in re.finditer(r"\]\(([^)#\s]+)(#[^)]*)?\)", open(os.path.join(repo, doc), encoding="utf-8").read()):
        t = m.group(1)
        if re.match(r"^[a-z]+:", t):
            continue
        p = os.path.normpath(os.path.join(os.path.dirname(doc), t))
        if p.startswith("..") or not os.path.exists(os.path.join(repo, p)):
            out.append(f"{doc}: link ({t}) does not resolve inside the repository")
    return out


def run_doc(repo, bindir, python, doc):
    work, env = sandbox(repo, bindir, python)
    fails, counts = links(repo, doc), {"ran": 0, "skipped": 0, "not code": 0}
    db = None
    try:
        for b in blocks(doc, os.path.join(repo, doc)):
            names = (b.marker("normalise") or "").split()
            for n in names:
                if n not in NORMALISE:
                    fails.append(f"{b.where()}: unknown normalisation '{n}'")
            if b.marker("db"):
                db = b.marker("db")
            if b.marker("not run"):
                counts["skipped"] += 1
                print(f"  skip {b.where()}: {b.marker('not run')}")
                continue
            is_transcript = any(l.startswith("$ ") for l in b.text.split("\n"))
            if b.lang in NOT_CODE and not is_transcript:
                if b.marker("file"):
                    with open(os.path.join(work, b.marker("file")), "w") as f:
                        f.write(b.text + "\n")
                counts["not code"] += 1
                continue
            if b.lang in ("", "sh", "bash", "console") and is_transcript:
                counts["ran"] += 1
                steps, prev_rc = transcript(b.text), 0
                for idx, (cmd, want) in enumerate(steps):
                    if cmd.strip() == "echo $?":
                        got = str(prev_rc)
                        if got != want.strip():
                            fails.append(f"{b.where()}: exit code {got}, printed {want.strip()}")
                        prev_rc = 0
                        continue
                    rc, out = run(["sh", "-c", cmd], work, env)
                    nxt = steps[idx + 1][0].strip() if idx + 1 < len(steps) else ""
                    if rc != 0 and nxt != "echo $?":
                        fails.append(f"{b.where()}: `{cmd.splitlines()[0]}` exited {rc} (print `$ echo $?` after it if that is meant)\n{out[-3000:]}")
                    diff = matches(want, out, names)
                    if diff:
                        fails.append(f"{b.where()}: output of `{cmd.splitlines()[0]}` differs from the printed one:\n{diff[:6000]}")
                    prev_rc = rc
                continue
            if b.lang in ("sh", "bash"):
                argv, stdin = ["sh", "-e", "-c", b.text], None
            elif b.lang == "python":
                needs = [m for m in (b.marker("needs") or "").replace(",", " ").split() if m]
                missing = [m for m in needs
                           if subprocess.run([python, "-c", f"import {m}"], capture_output=True).returncode]
                if missing:
                    counts["skipped"] += 1
                    print(f"  SKIP {b.where()}: needs {', '.join(missing)}, not importable by {python}")
                    continue
                argv, stdin = [python, "-c", b.text], None
            elif b.lang == "sql":
                if not db:
                    fails.append(f"{b.where()}: a SQL block with no <!-- db: PATH --> before it")
                    continue
                argv, stdin = ["sqlite3", "-bail", db], b.text
            else:
                fails.append(f"{b.where()}: a ```{b.lang or '(no language)'} block that is neither run nor "
                             "marked <!-- not run: REASON --> (use ```text for output, diagrams, formulas)")
                continue
            counts["ran"] += 1
            rc, out = run(argv, work, env, stdin)
            if rc != 0:
                fails.append(f"{b.where()}: the {b.lang} block exited {rc}\n{out[-3000:]}")
            elif getattr(b, "expected", None) is not None:
                diff = matches(b.expected.text, out, names or
                               (b.expected.marker("normalise") or "").split())
                if diff:
                    fails.append(f"{b.where()}: output differs from the block at line {b.expected.line}:\n{diff[:6000]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return fails, counts


def main():
    repo, bindir, python = (os.path.abspath(a) for a in sys.argv[1:4])
    docs = sys.argv[4:] or (["README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(repo, "docs")) if f.endswith(".md")))
    bad = 0
    for doc in docs:
        t0 = time.monotonic()
        fails, counts = run_doc(repo, bindir, python, doc)
        print(f"{'FAIL' if fails else 'ok  '} {doc}: {counts['ran']} run, {counts['skipped']} not run "
              f"(marked), {counts['not code']} not code; {time.monotonic() - t0:.1f} s")
        for f in fails:
            print("  FAIL " + f.replace("\n", "\n       "))
        bad += bool(fails)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
