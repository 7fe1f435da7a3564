#!/usr/bin/env bash
# The GPU check, run ON the GPU machine (one H200, its own torch 2.11.0+cu130 in python3,
# CMake, ninja, nvcc 13.0; no network) from the repository root, with .gpu-deps/ carried
# (scripts/gpu-prepare.sh).  Builds the engine against that machine's torch with NCCL, then:
#   1. a world-size-1 run on cuda:0 with backend nccl, with the reference comparison;
#   2. the default multimodule config with 8 ranks on the one GPU over Gloo (NCCL refuses two
#      ranks on one device), point-to-point staged through host memory, with the reference.
# Results (logs, check reports) go to $OUT when set, else to runs/gpu/.
set -euo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-runs/gpu}
mkdir -p "$OUTDIR" runs
export LD_LIBRARY_PATH="$PWD/.gpu-deps/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUTDIR/gpu.txt"
TORCH_CMAKE=$(python3 -c "import torch; print(torch.utils.cmake_prefix_path)")
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())" | tee -a "$OUTDIR/gpu.txt"
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DSTAGESCOPE_CUDA=ON -DSTAGESCOPE_WITH_UI=OFF -DSTAGESCOPE_BUILD_TESTS=OFF \
  -DSTAGESCOPE_DEPS_DIR="$PWD/.gpu-deps" -DCMAKE_PREFIX_PATH="$TORCH_CMAKE" \
  -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUTDIR/configure.log" 2>&1 || { tail -40 "$OUTDIR/configure.log"; exit 1; }
cmake --build build/gpu -j 16 --target stagescope > "$OUTDIR/build.log" 2>&1 || { tail -60 "$OUTDIR/build.log"; exit 1; }
EXE=build/gpu/app/stagescope

status=0
echo "== 1. world size 1, cuda:0, nccl"
"$EXE" run assets/configs/llm_pp4.toml -o runs/gpu-nccl1.db --force --reference --check \
  --set modules.llm.pp=1 --set device=\"cuda\" --set backend=\"nccl\" 2>&1 | tee "$OUTDIR/nccl1.log" || status=1
echo "== 2. 8 ranks on one GPU, gloo with host staging"
"$EXE" run assets/configs/default.toml -o runs/gpu-gloo8.db --force --reference --check \
  --set device=\"cuda\" 2>&1 | tee "$OUTDIR/gloo8.log" || status=1
exit $status
