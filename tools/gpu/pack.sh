#!/usr/bin/env bash
# Packs a CUDA build made on a machine without a GPU for tools/gpu/session.sh on a GPU machine that lacks
# the build dependencies: the programs and GPU test binaries (stripped) and every shared library they need
# except glibc, libstdc++ and the GL dispatch libraries, into gpu-pack/pack.tar.xz ($SPARGE_PACK_DIR changes
# the folder), plus the Debian GL loader packages for off-screen rendering on the NVIDIA driver.
# Build first:  SPARGE_BUILD_DIR=build-gpu scripts/build.sh
# Then copy the repository with the pack folder to the GPU machine and run tools/gpu/session.sh there.
# Other sets (tools/gpu/capi_pack.sh): $SPARGE_PACK_BINARIES (paths in the build folder), $SPARGE_PACK_NAME
# (the archive's name), SPARGE_PACK_GL=0 (no GL loader packages).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${SPARGE_BUILD_DIR:-$ROOT/build}"
PACK="${SPARGE_PACK_DIR:-$ROOT/gpu-pack}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/bin" "$TMP/lib" "$PACK"
BINARIES="${SPARGE_PACK_BINARIES:-cli/sparge gui/sparge-studio gui/sparge-studio-bench tests/kernels/sparge_kernel_tests
  tests/kernels/sparge_attention_tests tests/profiler/sparge_profiler_gpu_tests
  tests/profiler/sparge_profiler_nocupti_tests tests/tuner/sparge_tuner_bench}"
for b in $BINARIES; do cp "$BUILD/$b" "$TMP/bin/"; done
strip "$TMP"/bin/*
for lib in $(ldd "$TMP"/bin/* 2>/dev/null | awk '/=>/{print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|libutil.so*) ;;
    libgcc_s.so*|libstdc++.so*) ;;
    libEGL.so*|libOpenGL.so*|libGLdispatch.so*|libGLX*|libGL.so*) ;;  # from the GL loader packages below
    *) cp -L "$lib" "$TMP/lib/" ;;
  esac
done
tar -cJf "$PACK/${SPARGE_PACK_NAME:-pack.tar.xz}" -C "$TMP" bin lib
# The GL loader (glvnd) packages: NVIDIA's EGL driver needs them, and GPU machines without a desktop often
# lack them. Downloaded once; unpacked by tools/gpu/session.sh for the gui and frame steps.
if [ "${SPARGE_PACK_GL:-1}" != 0 ] && [ ! -d "$PACK/gl" ]; then
  lists="$(mktemp -d)"
  mkdir -p "$PACK/gl" "$lists/partial"
  o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$lists")
  apt-get "${o[@]}" update -qq
  (cd "$PACK/gl" &&
    apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  rm -rf "$lists"
fi
du -sh "$PACK"
