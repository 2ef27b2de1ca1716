#!/usr/bin/env bash
# Configures and builds Sparge Studio into build/ (or $SPARGE_BUILD_DIR). Extra arguments go to CMake.
# CUDA is used when nvcc is found (PATH or /usr/local/cuda/bin); the GUI is built unless
# -DSPARGE_WITH_GUI=OFF.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${SPARGE_BUILD_DIR:-$ROOT/build}"
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
JOBS="${SPARGE_JOBS:-$(nproc)}"
GEN=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD/Makefile" ]; then GEN=(-G Ninja); fi
cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$BUILD" -j "$JOBS"
