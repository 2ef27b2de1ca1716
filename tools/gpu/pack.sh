#!/usr/bin/env bash
# Packs a CUDA build made on a machine without a GPU for tools/gpu/session.sh on a GPU machine that lacks
# the build dependencies: the programs and GPU test binaries (stripped) and every shared library they need
# except glibc, libstdc++ and the GL dispatch libraries, into gpu-pack/pack.tar.xz ($SPARGE_PACK_DIR changes
# the folder), plus the Debian GL loader packages for off-screen rendering on the NVIDIA driver.
# Build first:  SPARGE_BUILD_DIR=build-gpu scripts/build.sh
# Then copy the repository with the pack folder to the GPU machine and run tools/gpu/session.sh there.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${SPARGE_BUILD_DIR:-$ROOT/build}"
PACK="${SPARGE_PACK_DIR:-$ROOT/gpu-pack}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/bin" "$TMP/lib" "$PACK"
cp "$BUILD/cli/sparge" "$BUILD/gui/sparge-studio" "$BUILD/gui/sparge-studio-bench" \
   "$BUILD/tests/kernels/sparge_kernel_tests" "$BUILD/tests/kernels/sparge_attention_tests" \
   "$BUILD/tests/profiler/sparge_profiler_gpu_tests" \
   "$BUILD/tests/profiler/sparge_profiler_nocupti_tests" "$BUILD/tests/tuner/sparge_tuner_bench" "$TMP/bin/"
strip "$TMP"/bin/*
for lib in $(ldd "$TMP"/bin/* 2>/dev/null | awk '/=>/{print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|libutil.so*) ;;
    libgcc_s.so*|libstdc++.so*) ;;
    libEGL.so*|libOpenGL.so*|libGLdispatch.so*|libGLX*|libGL.so*) ;;  # from the GL loader packages below
    *) cp -L "$lib" "$TMP/lib/" ;;
  esac
done
tar -cJf "$PACK/pack.tar.xz" -C "$TMP" bin lib
# The GL loader (glvnd) packages: NVIDIA's EGL driver needs them, and GPU machines without a desktop often
# lack them. Downloaded once; unpacked by tools/gpu/session.sh for the gui and frame steps.
if [ ! -d "$PACK/gl" ]; then
  lists="$(mktemp -d)"
  mkdir -p "$PACK/gl" "$lists/partial"
  o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$lists")
  apt-get "${o[@]}" update -qq
  (cd "$PACK/gl" &&
    apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  rm -rf "$lists"
fi
du -sh "$PACK"
