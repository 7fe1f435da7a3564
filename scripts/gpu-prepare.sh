#!/usr/bin/env bash
# Run HERE (a CPU machine with the project's Debian packages) before the GPU check: copies
# the headers of toml++, CLI11, nlohmann-json, gloo, SQLite and xxHash, and libsqlite3, into
# .gpu-deps/ (git-ignored), which travels to the GPU machine (no network, none of these -dev
# packages there) as a carried path.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu-deps
mkdir -p .gpu-deps/include .gpu-deps/lib
for d in toml++ CLI nlohmann gloo; do cp -r "/usr/include/$d" .gpu-deps/include/; done
cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h /usr/include/xxhash.h .gpu-deps/include/
cp -L /usr/lib/x86_64-linux-gnu/libsqlite3.so.0 .gpu-deps/lib/
du -sh .gpu-deps
