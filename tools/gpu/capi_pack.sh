#!/usr/bin/env bash
# Packs what tools/gpu/capi_check.sh runs on a GPU machine, built here (no GPU needed): libsparge_attn.so, the
# sparge CLI, the C API's and the kernels' GPU tests, and every shared library they need beyond glibc and
# libstdc++, into gpu-pack/capi-pack.tar.xz ($SPARGE_PACK_DIR changes the folder).
# Build first (Hopper only is enough):
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARGE_WITH_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90a-real
#   cmake --build build-gpu --target sparge sparge_attn sparge_capi_c_test sparge_capi_cuda_tests sparge_kernel_tests \
#     sparge_attention_tests
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${SPARGE_BUILD_DIR:-$ROOT/build-gpu}"
PACK="${SPARGE_PACK_DIR:-$ROOT/gpu-pack}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/bin" "$TMP/lib" "$PACK"
cp "$BUILD/cli/sparge" "$BUILD/tests/capi/sparge_capi_c_test" "$BUILD/tests/capi/sparge_capi_cuda_tests" \
   "$BUILD/tests/kernels/sparge_kernel_tests" "$BUILD/tests/kernels/sparge_attention_tests" "$TMP/bin/"
cp -L "$BUILD/capi/libsparge_attn.so.1" "$TMP/lib/"
strip "$TMP"/bin/* "$TMP"/lib/*
for lib in $(ldd "$TMP"/bin/* "$TMP"/lib/* 2>/dev/null | awk '/=>/{print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|libutil.so*) ;;
    libgcc_s.so*|libstdc++.so*|libcuda.so*) ;;
    libsparge_attn.so*) ;;
    *) cp -L "$lib" "$TMP/lib/" ;;
  esac
done
tar -cJf "$PACK/capi-pack.tar.xz" -C "$TMP" bin lib
du -sh "$PACK/capi-pack.tar.xz"
