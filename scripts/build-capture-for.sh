#!/usr/bin/env bash
# Builds stagescope_torch (the recording c10d backend, docs/capture.md) for any Python >= 3.10
# that has torch, against that interpreter's own torch, and makes it importable there.
#
#   scripts/build-capture-for.sh PYTHON [BUILD_DIR]
#
# PYTHON: the interpreter of the job (e.g. .venv-megatron/bin/python, or a conda env's python).
# BUILD_DIR (default build/capture-py<X.Y>): a separate CMake build of this repository with
# -DPython3_EXECUTABLE=PYTHON and -DSTAGESCOPE_TORCH_ROOT=<its torch package> (no viewer, no
# tests); only the stagescope_torch_module target (and the libraries it links) is built.
# Then <PYTHON's site-packages>/stagescope_torch.pth points at BUILD_DIR/python, as
# scripts/install-capture.sh does for .venv.  The module refuses, in one line, to import under
# a torch other than the one it was built against.  Needs Python's headers (python3.X-dev or a
# pyenv/conda Python, which ship them).  Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:?usage: scripts/build-capture-for.sh PYTHON [BUILD_DIR]}
command -v "$PY" >/dev/null 2>&1 || [ -x "$PY" ] || { echo "build-capture-for: $PY: no such interpreter" >&2; exit 2; }
read -r PYVER TORCH_ROOT TORCH_VERSION SITE < <("$PY" - <<'EOF'
import os, sys, sysconfig
if sys.version_info < (3, 10):
    sys.exit(f"build-capture-for: {sys.executable} is Python {sys.version.split()[0]}; 3.10 or newer is needed")
try:
    import importlib.util as u
    spec = u.find_spec("torch")
    if spec is None:
        raise ImportError
except ImportError:
    sys.exit(f"build-capture-for: {sys.executable} has no torch")
root = os.path.dirname(spec.origin)
ns = {}
exec(open(os.path.join(root, "version.py")).read(), ns)
print(f"{sys.version_info[0]}.{sys.version_info[1]}", root, ns["__version__"], sysconfig.get_paths()["purelib"])
EOF
)
BUILD=${2:-build/capture-py$PYVER}
test -f "$TORCH_ROOT/lib/libtorch_python.so" ||
  { echo "build-capture-for: $TORCH_ROOT/lib/libtorch_python.so missing (not a torch wheel?)" >&2; exit 1; }
PYEXE=$("$PY" -c 'import sys; print(sys.executable)')
echo "build-capture-for: Python $PYVER ($PYEXE), torch $TORCH_VERSION -> $BUILD"
# Release -O2 like the default preset; a configured tree is reconfigured only when the
# interpreter or torch changed.
if [ ! -f "$BUILD/build.ninja" ] ||
   ! grep -qx "Python3_EXECUTABLE:FILEPATH=$PYEXE" "$BUILD/CMakeCache.txt" ||
   ! grep -qx "STAGESCOPE_TORCH_ROOT:PATH=$TORCH_ROOT" "$BUILD/CMakeCache.txt"; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
    -DSTAGESCOPE_WERROR=ON -DSTAGESCOPE_WITH_UI=OFF -DSTAGESCOPE_BUILD_TESTS=OFF \
    "-DPython3_EXECUTABLE=$PYEXE" "-DSTAGESCOPE_TORCH_ROOT=$TORCH_ROOT" >"$BUILD.configure.log" 2>&1 ||
    { cat "$BUILD.configure.log" >&2; exit 1; }
fi
cmake --build "$BUILD" -j "${JOBS:-2}" --target stagescope_torch_module
PKG="$(cd "$BUILD" && pwd)/python"
ls "$PKG"/stagescope_torch/_C*.so >/dev/null 2>&1 ||
  { echo "build-capture-for: $PKG/stagescope_torch/_C*.so not built (Python headers missing? see $BUILD.configure.log)" >&2; exit 1; }
if [ "$(cat "$SITE/stagescope_torch.pth" 2>/dev/null)" != "$PKG" ]; then
  echo "$PKG" >"$SITE/stagescope_torch.pth"
  echo "build-capture-for: $SITE/stagescope_torch.pth -> $PKG"
fi
"$PY" -c "import stagescope_torch" || { echo "build-capture-for: the built module does not import" >&2; exit 1; }
echo "build-capture-for: ok (stagescope_torch for Python $PYVER, torch $TORCH_VERSION)"
