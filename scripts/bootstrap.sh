#!/usr/bin/env bash
# Installs everything stagescope needs on a fresh Debian 12 machine of this project's kind
# (2 cores, CUDA 13.0 toolkit present, Debian + PyPI reachable).  Idempotent: a second run
# only checks.  Versions that matter are pinned: torch (LibTorch) 2.11.0, the same as the
# GPU machine's image, so headers and ABI match on both.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=2.11.0
APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config python3-venv
  ccache                                       # compiler cache (CMakeLists.txt uses it when present)
  python3-dev                                  # headers for the stagescope_torch extension
  libsqlite3-dev sqlite3
  libxxhash-dev                                # XXH3-64, the checksum of recorded tensors (header only)
  libgloo-dev                                  # gloo headers: the torch wheel ships none
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libgtest-dev
  libimgui-dev libglfw3-dev libstb-dev libfreetype-dev libgl-dev zlib1g-dev
  xvfb xauth libgl1-mesa-dri                   # GUI tests under Xvfb + Mesa
  chromium                                     # HTML report screenshot test
  clang libclang-rt-14-dev                     # libFuzzer for the run-file reader fuzz target
  iproute2 procps
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import importlib.metadata as m,sys; sys.exit(m.version('torch')!='$TORCH_VERSION')" 2>/dev/null; then
  echo "bootstrap: installing torch==$TORCH_VERSION (LibTorch for C++; --no-deps: no Python CUDA libs)"
  .venv/bin/pip install -q --no-deps "torch==$TORCH_VERSION"
fi
# Python torch importable from the venv: the suite's independent recomputations (Python torch
# over a recorded run file), the capture backend's tests and the PyTorch peer benchmark need it.
# The wheel was installed --no-deps; its pure-Python dependencies and the three CUDA runtime
# libraries libtorch_cuda.so needs at import (cufile, cusparseLt, nvshmem) come from PyPI.
if ! .venv/bin/python -c "import torch.distributed.pipelining" >/dev/null 2>&1; then
  echo "bootstrap: making the venv's torch importable from Python"
  # --no-warn-conflicts: torch's requirement of triton (GPU kernels) is left out on purpose, and
  # pip would print it as an "ERROR" on every successful install.
  .venv/bin/pip install -q --no-warn-conflicts filelock typing-extensions sympy networkx jinja2 fsspec numpy
  .venv/bin/pip install -q --no-warn-conflicts "cuda-toolkit[cufile]==13.0.2" "nvidia-cusparselt-cu13==0.8.0" \
    "nvidia-nvshmem-cu13==3.4.5"
  .venv/bin/python -c "import torch.distributed.pipelining" ||
    { echo "bootstrap: Python torch is still not importable from .venv" >&2; exit 1; }
fi
# What the docs' Python examples import beyond torch (docs/run-file.md: XXH3 checksums with
# xxhash, a run file read with pandas); the docs test runs them.
# lizard: the complexity gate's measure (tests/layers/complexity_gate.py).
if ! .venv/bin/python -c "import xxhash, pandas, lizard" >/dev/null 2>&1; then
  echo "bootstrap: installing xxhash and pandas (the docs' Python examples) and lizard"
  .venv/bin/pip install -q --no-warn-conflicts xxhash pandas lizard==1.24.3
fi
TORCH_ROOT=$(.venv/bin/python -c "import importlib.util as u,os;print(os.path.dirname(u.find_spec('torch').origin))")
test -f "$TORCH_ROOT/lib/libtorch_cpu.so" || { echo "bootstrap: $TORCH_ROOT/lib/libtorch_cpu.so missing" >&2; exit 1; }
echo "bootstrap: ok (torch at $TORCH_ROOT)"
# Python 3.12 + megatron-core 0.19.2 for the Megatron-Core capture tests (they SKIP without it).
scripts/megatron-env.sh
