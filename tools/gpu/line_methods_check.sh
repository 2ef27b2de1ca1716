#!/usr/bin/env bash
# Checks and times MInference's and FlexPrefill's device Stage 1 on a GPU machine from binaries built
# elsewhere: sparge_line_methods_tests (against the CPU predictors, with the bundled sample), memcheck on
# the small cases, sparge_line_methods_bench at 32K D 128 and the dense walk of `sparge bench` beside it.
# Output goes to $OUT/line_methods.log (or ./gpu-out).
# Pack first: SPARGE_PACK_GL=0 SPARGE_PACK_NAME=line-pack.tar.xz SPARGE_PACK_BINARIES="cli/sparge
#   tests/kernels/sparge_line_methods_tests kernels/sparge_line_methods_bench" tools/gpu/pack.sh
# usage (repository root): tools/gpu/line_methods_check.sh <dir with bin/ and lib/>
set -uo pipefail
DIR=${1:?binary folder}
OUTDIR=${OUT:-gpu-out}
mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH=$DIR/lib:${LD_LIBRARY_PATH:-}
T=$DIR/bin/sparge_line_methods_tests
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  echo "== tests"
  SPARGE_SAMPLE_CAPTURE=$PWD/captures/sample.h5 timeout 120 "$T" 2>&1 |
    grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) |blocks,|Failure|^ *b [0-9]" | head -80
  echo "== memcheck"
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$T" \
    --gtest_filter='LineMethods.ShortSequences:LineMethods.UnlistedHeadsUntouched:LineMethods.Flex*' 2>&1 | tail -4
  echo "== line predictors"
  timeout 120 "$DIR/bin/sparge_line_methods_bench" --tokens 32768 --dim 128 --heads 32
  echo "== dense walk"
  timeout 200 "$DIR/bin/sparge" bench --tokens 32768 --dims 128 --heads 32 --causal 0 1 --topk 1.0 --no-cudnn
} 2>&1 | tee "$OUTDIR/line_methods.log"
