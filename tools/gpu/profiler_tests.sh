#!/usr/bin/env bash
# Builds and runs the profiler tests (CUPTI loader, missing CUPTI, GPU timing) on a GPU machine, from the repo root.
# Output also goes to $OUT/profiler_gpu_tests.txt when $OUT is set.
set -euo pipefail
BUILD=${BUILD:-build-gpu-prof}
LOG=${OUT:-/tmp}/profiler_gpu_tests.txt
cmake -S . -B "$BUILD" -G Ninja -DSPARGE_WITH_GUI=OFF -DSPARGE_WITH_CUDA=ON > /dev/null
cmake --build "$BUILD" -j"$(nproc)" --target sparge_profiler_tests sparge_profiler_gpu_tests \
  sparge_profiler_loader_tests sparge_profiler_nocupti_tests
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv || true
  "$BUILD/tests/profiler/sparge_profiler_gpu_tests" --gtest_color=no
  "$BUILD/tests/profiler/sparge_profiler_tests" --gtest_color=no --gtest_brief=1
  "$BUILD/tests/profiler/sparge_profiler_loader_tests" --gtest_color=no
  "$BUILD/tests/profiler/sparge_profiler_nocupti_tests" --gtest_color=no
} 2>&1 | tee "$LOG"
