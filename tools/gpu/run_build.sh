#!/usr/bin/env bash
# Runs the CUDA engine's GPU checks and benchmarks on a GPU machine, from a build folder made elsewhere
# (default build-cuda). Everything printed goes to $OUT/log (or ./gpu-out/log).
# usage: tools/gpu/run_build.sh [build-dir] [steps: tests,memcheck,racecheck,bench,torch]
set -uo pipefail
BUILD=${1:-build-cuda}
STEPS=${2:-tests,bench,torch,memcheck,racecheck}
OUTDIR=${OUT:-gpu-out}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/log
T=$BUILD/tests/kernels/sparge_kernel_tests
S=$BUILD/cli/sparge
export LD_LIBRARY_PATH=$BUILD/lib:${LD_LIBRARY_PATH:-}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  if has tests; then echo "== tests"; timeout ${T_TESTS:-200} "$T" 2>&1 | tee "$OUTDIR/tests.log" | grep -v "^\[ RUN\|^\[       OK" | head -150; fi
  if has bench; then
    echo "== bench"
    timeout ${T_BENCH:-200} "$S" bench ${BENCH_ARGS:-} --json "$OUTDIR/bench.json" 2>&1
  fi
  if has torch; then
    echo "== torch"
    PYTHONUNBUFFERED=1 timeout ${T_TORCH:-150} python3 bench/compare_torch.py "$OUTDIR/bench.json" --repeat ${TORCH_REPEAT:-10} --json "$OUTDIR/torch.json" 2>&1
  fi
  if has memcheck; then
    echo "== memcheck"
    timeout ${T_MEM:-150} compute-sanitizer --tool memcheck --error-exitcode 9 "$T" \
      --gtest_filter='CudaStage2.*:CudaEngineErrors.*' 2>&1 | tail -15
    echo "memcheck rc=${PIPESTATUS[0]}"
  fi
  if has racecheck; then
    echo "== racecheck"
    timeout ${T_RACE:-120} compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 "$T" \
      --gtest_filter='CudaStage2.MatchesCpuOnSameMaskAcrossShapes:CudaStage2.DenseHead*:CudaStage2.EmptyRows*' 2>&1 | tail -15
    echo "racecheck rc=${PIPESTATUS[0]}"
  fi
} 2>&1 | tee "$LOG"
