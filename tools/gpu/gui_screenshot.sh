#!/usr/bin/env bash
# Renders one screenshot of sparge-studio with the CUDA engine on a GPU machine with no display, through
# the NVIDIA driver's EGL (device platform). From the repository root on that machine:
#
#   bash tools/gpu/gui_screenshot.sh     (with .gl/ and, if prebuilt, the build folder copied alongside)
#
# It unpacks the GL loader packages (libglvnd, libegl, libgl .debs) found in .gl/, points glvnd at the
# NVIDIA EGL vendor file, builds sparge-studio with CUDA unless
# BUILD_DIR already holds one, and writes $OUT/gpu_screenshot.png (copy it to docs/screenshots/).
# The build needs the project's Debian build dependencies on that machine (ImGui, GLFW, HDF5, stb...):
# copy them as .debs the same way as for the CLI, or copy a build made there.
set -euo pipefail
BUILD_DIR=${BUILD_DIR:-build-gpu}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
if [ -d .gl ]; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json}
unset DISPLAY
if [ ! -x "$BUILD_DIR/gui/sparge-studio" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DSPARGE_WITH_CUDA=ON -DSPARGE_BUILD_TESTS=OFF
  cmake --build "$BUILD_DIR" -j16 --target sparge-studio
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
# A view of the sample on the CUDA engine (the status bar names the GPU); tools/gpu/session.sh (step gui) renders the README one.
"$BUILD_DIR/gui/sparge-studio" captures/sample.h5 --engine cuda --backend egl --entry l15_s000 --head 2 \
  --set theta=0.3 --set tau=0.9 --set lambda=20 --size 1600x1000 --frames 6 --timeout 300 \
  --mouse 560,630 --screenshot "$OUT/gpu_screenshot.png"
echo "wrote $OUT/gpu_screenshot.png"
