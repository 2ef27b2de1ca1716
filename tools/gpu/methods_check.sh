#!/usr/bin/env bash
# The device block predictors' GPU checks, from the repository root of a GPU machine: the CUDA engine against
# the CPU engine for every method with a device predictor (random captures and the bundled sample),
# `sparge bench --method` (every method) at 32K, D 128, 32 heads (each method's Stage 1 against the dense
# walk, XAttention at strides 8 and 16, non-causal and causal; 128x64 tiles; 8K as a sanity check), compute-sanitizer memcheck on
# the random captures, and SpargeAttn's Stage 1 tests (its device parts are shared).
# Input: a pack made by tools/gpu/pack.sh with SPARGE_PACK_BINARIES="cli/sparge
# tests/kernels/sparge_method_predictor_tests tests/kernels/sparge_kernel_tests". Output: $OUT/methods_log.txt
# and the bench JSON files in $OUT.
# usage: tools/gpu/methods_check.sh [PACK_FILE=gpu-pack/pack.tar.xz]   (about 4 minutes, at most 8)
set -uo pipefail
PACK="${1:-gpu-pack/pack.tar.xz}"
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT" /tmp/sp
# Unpacked afresh every time: a warm machine keeps /tmp, and an earlier pack's binaries must not be run.
rm -rf /tmp/sp && mkdir -p /tmp/sp && tar -xJf "$PACK" -C /tmp/sp
export LD_LIBRARY_PATH=/tmp/sp/lib:${LD_LIBRARY_PATH:-}
export SPARGE_SAMPLE_CAPTURE="${SPARGE_SAMPLE_CAPTURE:-$PWD/captures/sample.h5}"
B=/tmp/sp/bin
bench() { timeout 90 $B/sparge bench --dims 128 --topk 0.5 --no-cudnn --repeat 10 "$@" 2>&1 | tail -9; }
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  echo "== the CUDA engine's predictors against the CPU engine's"
  timeout 100 $B/sparge_method_predictor_tests 2>&1 | grep -v "^\[ *RUN\|^\[ *OK" | tail -60
  echo "== bench 32K, every method (XAttention stride 8, MoBA top-k 3, MInference vertical_slash)"
  bench --tokens 32768 --causal 0,1 --method xattention,moba,minference,flexprefill --json "$OUT/bench_32k_s8.json"
  echo "== bench 32K, XAttention stride 16"
  bench --tokens 32768 --causal 0,1 --method xattention --xattn-stride 16 --json "$OUT/bench_32k_s16.json"
  echo "== memcheck: random captures"
  timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 $B/sparge_method_predictor_tests \
    --gtest_brief=1 --gtest_filter='*Random*' 2>&1 | grep -v "differ in mask" | tail -5
  echo "== SpargeAttn's Stage 1 and the per-head results"
  timeout 30 $B/sparge_kernel_tests --gtest_brief=1 --gtest_filter='CudaStage1*:HeadResults*' 2>&1 | tail -4
  echo "== bench 32K, 128x64 tiles"
  bench --tokens 32768 --causal 0 --geometry 128x64 --method xattention,moba,minference,flexprefill \
    --json "$OUT/bench_32k_128x64.json"
  echo "== bench 8K (sanity)"
  bench --tokens 8192 --causal 0 --method xattention,moba,minference,flexprefill
  date -u
} 2>&1 | tee "$OUT/methods_log.txt"
