"""docs/capture.md's tutorial "Check a Megatron-Core multimodule job", executed as printed.

The two fenced blocks after `<!-- recipe: megatron-conform -->` and `<!-- recipe:
megatron-hang -->` run, in that order and in one environment (the second relies on the first's
`export`), in a fresh directory that holds what a clone holds there: `.venv-megatron`, `tests/`
and `build/default/app/stagescope` (links to this build's).  The first block must succeed
command by command (`sh -e`) and print the plan_order line docs/capture.md quotes; the second must
end with `check`'s exit 10 after `merge` printed the cause docs/capture.md quotes.  Quoted texts are
read from docs/capture.md itself (up to its "…"), so text and behaviour cannot drift apart.

Usage: megatron_tutorial.py REPO STAGESCOPE.  Exit 77 (CTest SKIP), saying why, without
.venv-megatron or without megatron-core / stagescope_torch importable there."""

import os
import re
import subprocess
import sys
import tempfile


def block(readme, name):
    """The fenced block after `<!-- recipe: NAME -->`, without its fences."""
    m = re.search(r"<!-- recipe: " + re.escape(name) + r" -->\n```[a-z]*\n(.*?)\n```", readme, re.S)
    if not m:
        sys.exit(f"FAIL: docs/capture.md has no recipe '{name}' (a fenced block after its marker)")
    return m.group(1)


def quoted(readme, before):
    """The doc's backticked quote that follows `before`, up to its ' …' (the quoted prefix)."""
    start = readme.index(before) + len(before)
    text = readme[start:readme.index("`", start)]
    return re.sub(r"\s+", " ", text.split("…")[0]).rstrip(" (")


def main():
    repo, stagescope = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    python = os.path.join(repo, ".venv-megatron", "bin", "python")
    if not os.access(python, os.X_OK):
        print(f"SKIP: {python} is missing (scripts/megatron-env.sh makes it)")
        return 77
    probe = subprocess.run([python, "-c", "import megatron.core, stagescope_torch"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print("SKIP: megatron-core or stagescope_torch is not importable in .venv-megatron: " +
              probe.stderr.strip().splitlines()[-1])
        return 77
    with open(os.path.join(repo, "docs", "capture.md")) as f:
        readme = f.read()
    conform, hang = block(readme, "megatron-conform"), block(readme, "megatron-hang")
    want_conform = quoted(readme, "its `plan_order` line reads `")
    # merge's three lines as the tutorial quotes them: the cause in full, what to change and the
    # verdict's first line (each quote's parts around "…" must all be printed)
    want_hang = [quoted(readme, "the cause in full (`"), quoted(readme, "what to change (`")]
    lead = "the verdict in one first line: `"
    verdict = readme[readme.index(lead) + len(lead):]
    want_hang += [re.sub(r"\s+", " ", part).strip() for part in verdict[:verdict.index("`")].split("…")]

    with tempfile.TemporaryDirectory(prefix="stagescope-tutorial-") as work:
        os.symlink(os.path.join(repo, ".venv-megatron"), os.path.join(work, ".venv-megatron"))
        os.symlink(os.path.join(repo, "tests"), os.path.join(work, "tests"))
        os.makedirs(os.path.join(work, "build", "default", "app"))
        os.symlink(stagescope, os.path.join(work, "build", "default", "app", "stagescope"))

        def sh(flags, script):
            r = subprocess.run(["sh"] + flags + ["-c", script], cwd=work, capture_output=True,
                               text=True, timeout=400)
            return r.returncode, r.stdout + r.stderr

        rc, out = sh(["-e"], conform)
        if rc != 0:
            print(out[-6000:])
            sys.exit(f"FAIL: the conforming block exited {rc}")
        flat = re.sub(r"\s+", " ", out)
        if want_conform not in flat:
            print(out[-6000:])
            sys.exit(f"FAIL: docs/capture.md quotes `{want_conform} …`; check did not print it")
        print(f"ok: conforming job: '{want_conform} …'")

        exports = "\n".join(l for l in conform.splitlines() if l.startswith("export "))
        rc, out = sh([], exports + "\n" + hang)
        flat = re.sub(r"\s+", " ", out)
        if rc != 10:
            print(out[-6000:])
            sys.exit(f"FAIL: the hang block's check exited {rc}, docs/capture.md says 10")
        for want in want_hang:
            if want not in flat:
                print(out[-6000:])
                sys.exit(f"FAIL: docs/capture.md quotes `{want}`; merge did not print it")
        print(f"ok: hung job: check exit 10, " + "; ".join(f"'{w}'" for w in want_hang))
    return 0


if __name__ == "__main__":
    sys.exit(main())
