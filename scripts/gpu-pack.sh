#!/usr/bin/env bash
# Packs a CUDA build made on a CPU machine for scripts/gpu-session.sh on a GPU machine: the binaries
# (stripped) and every shared library they need except glibc, libstdc++ and the GL dispatch libraries,
# into .device/pack.tar.xz (git-ignored; carry `.device` with the device tool). Build first:
#   SPARGE_BUILD_DIR=build-gpu scripts/build.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${SPARGE_BUILD_DIR:-$ROOT/build}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/bin" "$TMP/lib" "$ROOT/.device"
cp "$BUILD/cli/sparge" "$BUILD/gui/sparge-studio" "$BUILD/gui/sparge-studio-bench" "$BUILD/tests/kernels/sparge_kernel_tests" \
   "$BUILD/tests/profiler/sparge_profiler_gpu_tests" "$BUILD/tests/profiler/sparge_profiler_nocupti_tests" \
   "$BUILD/tests/tuner/sparge_tuner_bench" "$TMP/bin/"
strip "$TMP"/bin/*
for lib in $(ldd "$TMP"/bin/* 2>/dev/null | awk '/=>/{print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|libutil.so*|libgcc_s.so*|libstdc++.so*) ;;
    libEGL.so*|libOpenGL.so*|libGLdispatch.so*|libGLX*|libGL.so*) ;;  # from the GL loader .debs, see below
    *) cp -L "$lib" "$TMP/lib/" ;;
  esac
done
tar -cJf "$ROOT/.device/pack.tar.xz" -C "$TMP" bin lib
# The GL loader packages for headless rendering on the NVIDIA driver (device README, "Headless rendering").
if [ ! -d "$ROOT/.device/.gl" ]; then
  mkdir -p "$ROOT/.device/.gl" /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update -qq
  (cd "$ROOT/.device/.gl" && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
du -sh "$ROOT/.device"
