#!/usr/bin/env python3
"""Recomputes every recorded checksum of a `full` run file outside the C++ code.

Usage: verify_run_checksums.py RUN.db      (or --self-test: the published XXH3 vectors only)

Reads each payload with Python's sqlite3, recomputes XXH3-64 with tests/checksum/xxh3.py
(pure Python, shares no code with the engine) and compares it with the stored `checksum`
(a signed INTEGER holding the unsigned 64-bit pattern).  Exits 0 when every payload-bearing
row of transfers, gradients and reference_gradients agrees and there was at least one of
each kind that the run records; prints the first disagreement and exits 1 otherwise.
"""

import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xxh3 import xxh3_64  # noqa: E402

P32, P64 = 2654435761, 11400714785074694797
VECTORS = {  # xxHash's published sanity vectors, XXH3_64bits with seed 0
    0: 0x2D06800538D394C2, 1: 0xC44BDFF4074EECDB, 6: 0x27B56A84CD2D7325,
    12: 0xA713DAF0DFBB77E7, 24: 0xA3FE70BF9D3510EB, 48: 0x397DA259ECBA1F11,
    80: 0xBCDEFBBB2C47C90A, 195: 0xCD94217EE362EC3A, 403: 0xCDEB804D65C6DEA4,
    512: 0x617E49599013CB6B, 2048: 0xDD59E2C3A5F038E0, 2240: 0x6E73A90539CF2948,
    2367: 0xCB37AEB9E5D361ED,
}

# At most this many payload bytes per table are recomputed (pure Python is slow).
BUDGET = 2 << 20


def self_test():
    buf, gen = bytearray(4096 + 64 + 1), P32
    for i in range(len(buf)):
        buf[i] = gen >> 56
        gen = (gen * P64) % (1 << 64)
    for n, want in VECTORS.items():
        got = xxh3_64(buf[:n])
        if got != want:
            print(f"xxh3.py: length {n}: got {got:016x}, published {want:016x}")
            return False
    return True


def verify(path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    fn = con.execute("SELECT checksum_function FROM run WHERE id = 1").fetchone()
    if not fn or fn[0] != "xxh3_64":
        print(f"{path}: run.checksum_function is {fn!r}, expected 'xxh3_64'")
        return False
    checked = {}
    for table in ("transfers", "gradients", "reference_gradients"):
        spent = 0
        rows = con.execute(
            f"SELECT id, payload, checksum FROM {table} "
            "WHERE payload IS NOT NULL AND checksum IS NOT NULL ORDER BY length(payload)")
        for rid, payload, stored in rows:
            if spent + len(payload) > BUDGET and checked.get(table):
                break
            spent += len(payload)
            got, want = xxh3_64(payload), stored % (1 << 64)
            if got != want:
                print(f"{path}: {table} id {rid}: recorded {want:016x}, "
                      f"recomputed {got:016x} over {len(payload)} bytes")
                return False
            checked[table] = checked.get(table, 0) + 1
    for table in ("transfers", "gradients"):
        if not checked.get(table):
            print(f"{path}: no {table} row with payload and checksum: not a `full` run?")
            return False
    print("recomputed " + ", ".join(f"{n} {t}" for t, n in checked.items()) +
          " checksums in Python: all equal to the recorded ones")
    return True


def main():
    if not self_test():
        return 1
    if sys.argv[1:] == ["--self-test"]:
        print("xxh3.py reproduces the published XXH3-64 vectors")
        return 0
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    return 0 if verify(sys.argv[1]) else 1


if __name__ == "__main__":
    sys.exit(main())
