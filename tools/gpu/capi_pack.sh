#!/usr/bin/env bash
# Packs what tools/gpu/capi_check.sh runs on a GPU machine, built here (no GPU needed): the sparge CLI, the C
# API's and the kernels' GPU tests and every shared library they need (libsparge_attn.so among them), into
# gpu-pack/capi-pack.tar.xz (tools/gpu/pack.sh with this set; $SPARGE_PACK_DIR changes the folder).
# Build first (Hopper only is enough):
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARGE_WITH_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90a-real
#   cmake --build build-gpu --target sparge sparge_attn sparge_capi_c_test sparge_capi_cuda_tests sparge_kernel_tests \
#     sparge_attention_tests
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SPARGE_BUILD_DIR="${SPARGE_BUILD_DIR:-$HERE/../../build-gpu}" SPARGE_PACK_NAME=capi-pack.tar.xz SPARGE_PACK_GL=0 \
  SPARGE_PACK_BINARIES="cli/sparge tests/capi/sparge_capi_c_test tests/capi/sparge_capi_cuda_tests
    tests/kernels/sparge_kernel_tests tests/kernels/sparge_attention_tests" \
  exec "$HERE/pack.sh"
