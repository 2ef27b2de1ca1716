#!/usr/bin/env bash
# Checks and times the attention kernels on a GPU machine from binaries built elsewhere: the direct kernel
# tests, the engine's GPU tests, compute-sanitizer memcheck and racecheck, the kernel benchmark, the TMA
# streaming floor of the sparse walks (sparge_tma_stream_bench, when present) and torch SDPA (cuDNN, flash)
# on the same shapes. Output goes to $OUT/kernels.log (or ./gpu-out).
# usage: tools/gpu/kernel_check.sh <dir with bin/ and lib/> [steps: tests,engine,memcheck,racecheck,bench,stream,sdpa]
# Environment: BENCH_ARGS (sparge_attention_bench options), SDPA_ARGS (bench/sdpa_baseline.py options).
set -uo pipefail
DIR=${1:?binary folder}
STEPS=${2:-tests,engine,memcheck,racecheck,bench,stream,sdpa}
OUTDIR=${OUT:-gpu-out}
mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH=$DIR/lib:${LD_LIBRARY_PATH:-}
T=$DIR/bin/sparge_attention_tests
E=$DIR/bin/sparge_kernel_tests
has() { [[ ",$STEPS," == *",$1,"* ]]; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
  if has tests; then
    echo "== kernel tests"
    timeout ${T_TESTS:-300} "$T" 2>&1 | grep -v "^\[ RUN\|^\[       OK" | tail -60
  fi
  if has engine; then
    echo "== engine tests"
    timeout ${T_ENGINE:-300} "$E" 2>&1 | grep -v "^\[ RUN\|^\[       OK" | tail -40
  fi
  if has memcheck; then
    echo "== memcheck"
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$T" \
      --gtest_filter='AttentionKernels.Int8Fp8*:AttentionKernels.Exact*:QuantizeKernels.Int8*' 2>&1 | tail -6
    echo "memcheck rc=${PIPESTATUS[0]}"
  fi
  if has racecheck; then
    echo "== racecheck"
    timeout 300 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 "$T" \
      --gtest_filter='AttentionKernels.Exact*:AttentionKernels.LongRows*' 2>&1 | tail -6
    echo "racecheck rc=${PIPESTATUS[0]}"
  fi
  if has bench; then
    echo "== kernel bench"
    # shellcheck disable=SC2086
    timeout ${T_BENCH:-400} "$DIR/bin/sparge_attention_bench" ${BENCH_ARGS:-} 2>&1
  fi
  if has stream && [ -x "$DIR/bin/sparge_tma_stream_bench" ]; then
    echo "== TMA stream (K/V alone)"
    timeout ${T_STREAM:-200} "$DIR/bin/sparge_tma_stream_bench" 2>&1
  fi
  if has sdpa; then
    echo "== torch SDPA"
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 timeout 200 python3 "$(dirname "$0")/../../bench/sdpa_baseline.py" ${SDPA_ARGS:-} 2>&1
  fi
  nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
} 2>&1 | tee "$OUTDIR/kernels.log"
