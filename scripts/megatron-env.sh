#!/usr/bin/env bash
# Makes .venv-megatron/: a Python 3.12 environment with megatron-core==0.19.2 (a cp312 wheel)
# and the same torch as .venv (2.11.0), for the Megatron-Core capture tests
# (tests/capture/megatron_multimodule_*.py) and for users who want to record a Megatron job.
# Called at the end of scripts/bootstrap.sh.  Idempotent: a second run only checks.
#
# Python 3.12 is looked for as $MEGATRON_PYTHON, `python3.12` on PATH (if it runs), then
# pyenv's versions (~/.pyenv/versions/3.12.*).  None found: one line says the Megatron tests
# will SKIP, and the script exits 0 (megatron-core is never required to build or test the rest).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${MEGATRON_VENV:-.venv-megatron}   # another folder for a trial install
TORCH_VERSION=2.11.0      # the same as .venv's (scripts/bootstrap.sh): one LibTorch ABI
MEGATRON_VERSION=0.19.2
TRITON_VERSION=3.6.0      # torch 2.11.0's pin; megatron.core imports triton unconditionally

find_python312() {
  local c
  for c in "${MEGATRON_PYTHON:-}" python3.12 "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.12*/bin/python3.12 \
           /usr/bin/python3.12 /usr/local/bin/python3.12; do
    [ -n "$c" ] || continue
    if "$c" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; then
      "$c" -c 'import sys; print(sys.executable)'
      return 0
    fi
  done
  return 1
}

# The check a second run makes: everything importable at the pinned versions.
ready() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - <<EOF >/dev/null 2>&1
import importlib.metadata as m, sys
ok = m.version("torch") == "$TORCH_VERSION" and m.version("megatron-core") == "$MEGATRON_VERSION"
import torch.distributed, megatron.core
from megatron.core.pipeline_parallel.multimodule_communicator import MultiModulePipelineCommunicator
from megatron.core.pipeline_parallel import schedules
sys.exit(0 if ok else 1)
EOF
}

if ready; then
  echo "megatron-env: ok ($VENV: torch $TORCH_VERSION, megatron-core $MEGATRON_VERSION)"
  exit 0
fi

if ! PY312=$(find_python312); then
  echo "megatron-env: no Python 3.12 found (set MEGATRON_PYTHON): the Megatron-Core tests will SKIP"
  exit 0
fi

start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PY312" -m venv "$VENV"
# pip's resolver warns that torch's (unneeded) CUDA dependencies are missing: those lines are
# dropped, any other message is kept.
pipq() {
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 |
    { grep -v -e "dependency resolver does not currently" -e "which is not installed" -e "^torch .* requires" || true; }
  return "${PIPESTATUS[0]}"
}
echo "megatron-env: installing torch==$TORCH_VERSION, megatron-core==$MEGATRON_VERSION into $VENV ($PY312)"
# torch --no-deps as in .venv: the CPU path needs no Python CUDA libraries beyond the three
# libtorch_cuda.so loads at import (cufile, cusparseLt, nvshmem).
pipq --no-deps "torch==$TORCH_VERSION"
pipq filelock typing-extensions sympy networkx jinja2 fsspec numpy
pipq "cuda-toolkit[cufile]==13.0.2" "nvidia-cusparselt-cu13==0.8.0" "nvidia-nvshmem-cu13==3.4.5"
# megatron-core's import needs: triton (torch's pin), setuptools<82 (torch.utils.cpp_extension
# imports pkg_resources-era APIs), packaging; --no-deps keeps pip from replacing torch.
pipq "triton==$TRITON_VERSION" "setuptools<82" packaging
pipq --no-deps "megatron-core==$MEGATRON_VERSION"
if ! ready; then
  echo "megatron-env: $VENV is incomplete; the failing import:" >&2
  "$VENV/bin/python" -c "import megatron.core; from megatron.core.pipeline_parallel import schedules" >&2 || true
  exit 1
fi
echo "megatron-env: ok ($VENV ready in $(( $(date +%s) - start )) s)"
