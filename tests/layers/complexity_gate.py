"""The complexity gate: no product function grows past 120 lines or a cyclomatic complexity of 40.

Usage: complexity_gate.py ROOT ALLOW [FOLDER...]   (FOLDER relative to ROOT; default: the product
folders app core storage ui)

Measured with lizard (PyPI; the bootstrap installs it into .venv): `length` is the function's
lines from its signature to its closing brace, CCN its cyclomatic complexity.  ALLOW lists the
functions already past a limit when the gate was set (one per line: `file function length ccn`):
each may stay, but may not grow; one that shrinks under both limits must leave the list.  Data
tables (a function that is one long initializer, CCN 1) are listed there too, with the reason, and
may grow in length as long as they stay CCN 1.
Exit 0 when every function keeps its limits; 1 listing each one that does not (FILE:LINE name,
its length and CCN against the limit or its allowance); 77 (SKIP) when lizard is not installed.
"""

import os
import sys

MAX_LENGTH, MAX_CCN = 120, 40


def allowances(path):
    allowed = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                file, name, length, ccn = line.split()
                allowed[(file, name)] = (int(length), int(ccn))
    return allowed


def main():
    root, allow_path = sys.argv[1], sys.argv[2]
    folders = sys.argv[3:] or ["app", "core", "storage", "ui"]
    try:
        import lizard
    except ImportError:
        print("complexity gate: lizard is not installed in this Python (scripts/bootstrap.sh "
              "installs it into .venv)")
        return 77
    allowed = allowances(allow_path)
    seen, problems, checked = set(), [], 0
    paths = []
    for folder in folders:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            paths += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith((".cpp", ".h"))]
    for path in sorted(paths):
        rel = os.path.relpath(path, root)
        for fn in lizard.analyze_file(path).function_list:
            checked += 1
            length, ccn = fn.length, fn.cyclomatic_complexity
            key = (rel, fn.name)
            if key in allowed:
                seen.add(key)
                a_len, a_ccn = allowed[key]
                if a_ccn == 1 and ccn == 1:
                    continue  # a data table (one initializer): it grows with the data, not in logic
                if length > a_len or ccn > a_ccn:
                    problems.append(f"{rel}:{fn.start_line} {fn.name}: {length} lines, CCN {ccn}; "
                                    f"allowed {a_len} lines, CCN {a_ccn} (it may not grow: split it)")
                elif length <= MAX_LENGTH and ccn <= MAX_CCN:
                    problems.append(f"{rel}:{fn.start_line} {fn.name}: now within the limits "
                                    f"({length} lines, CCN {ccn}): remove it from {allow_path}")
            elif length > MAX_LENGTH or ccn > MAX_CCN:
                problems.append(f"{rel}:{fn.start_line} {fn.name}: {length} lines, CCN {ccn}; the "
                                f"limits are {MAX_LENGTH} lines and CCN {MAX_CCN} (split it)")
    for key in sorted(set(allowed) - seen):
        problems.append(f"{key[0]} {key[1]}: listed in {allow_path} but not found (remove it)")
    for p in problems:
        print(p)
    print(f"complexity gate: {checked} functions in {', '.join(folders)}; {len(allowed)} allowed "
          f"past the limits; {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
