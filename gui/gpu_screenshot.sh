#!/usr/bin/env bash
# Renders one screenshot of sparge-studio with the CUDA engine on a GPU machine with no display, through
# the NVIDIA driver's EGL (device platform). For the lead, on the device machine, from the repository root:
#
#   run(carry=[".gl", <build folder if prebuilt>], command="bash gui/gpu_screenshot.sh")
#
# It unpacks the GL loader packages carried in .gl/ (see /work/.library/device/README.md, "Headless
# rendering"), points glvnd at the NVIDIA EGL vendor file, builds sparge-studio with CUDA unless
# BUILD_DIR already holds one, and writes $OUT/gpu_screenshot.png (copy it to docs/screenshots/).
# The build needs the project's Debian build dependencies on that machine (ImGui, GLFW, HDF5, stb...):
# carry them as .debs the same way as the CUDA helper does for the CLI, or carry a build made there.
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
# A view of the sample on the CUDA engine (the status bar names the GPU); scripts/gpu-session.sh (step gui) renders the README one.
"$BUILD_DIR/gui/sparge-studio" captures/sample.h5 --engine cuda --backend egl --entry l15_s000 --head 2 \
  --set theta=0.3 --set tau=0.9 --set lambda=20 --size 1600x1000 --frames 6 --timeout 300 \
  --mouse 560,630 --screenshot "$OUT/gpu_screenshot.png"
echo "wrote $OUT/gpu_screenshot.png"
