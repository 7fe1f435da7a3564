#!/usr/bin/env bash
# Makes the built stagescope_torch package importable from the project venv: writes
# .venv/lib/python3.X/site-packages/stagescope_torch.pth pointing at BUILD/python (the
# folder the build puts the extension and its Python files in).  Run by `make build`;
# idempotent; touches only that one .pth file, which it owns.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/default}
PKG="$(cd "$BUILD" && pwd)/python"
if ! ls "$PKG"/stagescope_torch/_C*.so >/dev/null 2>&1; then
  echo "install-capture: $PKG/stagescope_torch/_C*.so not built (python3-dev missing?); skipped" >&2
  exit 0
fi
SITE=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
PTH="$SITE/stagescope_torch.pth"
if [ "$(cat "$PTH" 2>/dev/null)" != "$PKG" ]; then
  echo "$PKG" >"$PTH"
  echo "install-capture: $PTH -> $PKG"
fi
