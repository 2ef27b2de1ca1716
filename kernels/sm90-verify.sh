#!/usr/bin/env bash
# One-shot GPU verification of the opt-in Hopper Stage-2 kernel (attention_sm90.cu), run on the device
# machine after scripts/gpu-session.sh has unpacked .device/pack.tar.xz into /tmp/sp:
#   bash scripts/gpu-session.sh kernels; bash kernels/sm90-verify.sh
# Output: $OUT/sm90.txt (also printed).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
B=/tmp/sp/bin
export LD_LIBRARY_PATH=/tmp/sp/lib:${LD_LIBRARY_PATH:-}
F='Sm90Layout.*:CudaStage2Sm90.*'
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "== sm90 tests (each sets SPARGE_ATTN_KERNEL=sm90 itself and checks the wgmma kernel ran)"
  timeout 180 $B/sparge_kernel_tests --gtest_filter="$F" 2>&1 | grep -v "^\[ RUN" | tail -40
  echo "== memcheck (sm90: empty rows, PV skip)"
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/sparge_kernel_tests \
    --gtest_filter='CudaStage2Sm90.EmptyRows*:CudaStage2Sm90.PvSkip*' 2>&1 | tail -4
  echo "memcheck rc=${PIPESTATUS[0]}"
  echo "== racecheck (sm90: empty rows)"
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/sparge_kernel_tests \
    --gtest_filter='CudaStage2Sm90.EmptyRows*' 2>&1 | tail -4
  echo "racecheck rc=${PIPESTATUS[0]}"
  for k in sm80 sm90; do
    echo "== bench 64x128 --kernel $k (same card, same call)"
    timeout 100 $B/sparge bench --tokens 16384 --dims 64,128 --causal 0,1 --topk 1.0,0.2 --geometry 64x128 \
      --kernel $k --repeat 10 --json "$OUT/bench_$k.json" 2>&1 | tail -12
  done
} 2>&1 | tee "$OUT/sm90.txt"
