#!/usr/bin/env bash
# Head dim 256 on a GPU machine: `sparge run --engine cuda` on the Gemma 3 sliding-window capture (D 256, made
# by tests/captures/test_window_model.py --write-capture) with that test's arguments, exporting the masks and
# the report its numpy oracles judge (SPARGE_CUDA_RECORDED), then the attention kernels' and the CUDA engine's
# tests, a short `sparge bench` at D 256, and compute-sanitizer on the D 256 kernel tests.
# Input: one folder with pack.tar.xz (tools/gpu/pack.sh; bin/sparge, bin/sparge_kernel_tests and
# bin/sparge_attention_tests are used) and gemma3.h5 (the capture).
# Output in $OUT (default ./gpu-out): log.txt, masks_cuda.h5, report_cuda.json, capture.sha256, bench_d256.json.
# The masks, report and the capture's content digest (`tests/captures/test_window_model.py --digest`) go to
# tests/captures/recorded/gemma3_window_cuda, where the test judges them on machines without a GPU.
# usage: tools/gpu/window_capture.sh FOLDER    (at most ~10 minutes: every step has its own time limit)
set -uo pipefail
DIR="${1:?usage: tools/gpu/window_capture.sh FOLDER (pack.tar.xz and gemma3.h5)}"
OUT="${OUT:-$PWD/gpu-out}"
HERE="$(cd "$(dirname "$0")" && pwd)"
SP=/tmp/sparge-d256
mkdir -p "$OUT" "$SP"
[ -x "$SP/bin/sparge" ] || tar -xJf "$DIR/pack.tar.xz" -C "$SP"
export LD_LIBRARY_PATH="$SP/lib:${LD_LIBRARY_PATH:-}"
B="$SP/bin"
CAPTURE="$DIR/gemma3.h5"
# The run arguments the window-model test checks against (its RUN_ARGS), read from the test itself (beside
# this script in a checkout, else under the current folder: a copy of the script may run from elsewhere).
TEST_PY="$HERE/../../tests/captures/test_window_model.py"
[ -f "$TEST_PY" ] || TEST_PY="$PWD/tests/captures/test_window_model.py"
mapfile -t RUN_ARGS < <(python3 -c "
import ast, re
src = open('$TEST_PY').read()
print('\n'.join(ast.literal_eval(re.search(r'^RUN_ARGS = (\[.*?\])', src, re.M).group(1))))")
# One gtest binary under a time limit, with a one-line verdict.
gtest() {
  local limit="$1" bin="$2"
  shift 2
  timeout "$limit" "$B/$bin" --gtest_brief=1 "$@" 2>&1 | grep -v '^\[ fp8 L1 \]' | tail -25
  echo "exit status: ${PIPESTATUS[0]}"
}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  sha256sum "$CAPTURE" | tee "$OUT/capture.sha256"
  echo "== sparge run --engine cuda on the Gemma 3 capture: ${RUN_ARGS[*]}"
  timeout 60 "$B/sparge" run "$CAPTURE" --engine cuda "${RUN_ARGS[@]}" --masks "$OUT/masks_cuda.h5" \
    --report "$OUT/report_cuda.json" 2>&1 | tail -20
  echo "exit status: ${PIPESTATUS[0]}"
  echo "== attention kernels at D 256 (the host oracle), then the whole kernel suite"
  gtest 120 sparge_attention_tests --gtest_filter='*HeadDim256*:*OtherHeadDims*:QuantizeKernels.*'
  gtest 90 sparge_attention_tests --gtest_filter='-*HeadDim256*:QuantizeKernels.*'
  echo "== CUDA engine tests (D 256 against the CPU engine and the double-precision oracle, and the rest)"
  gtest 150 sparge_kernel_tests
  echo "== sparge bench at D 256, both geometries (kernel column: the family that ran Stage 2)"
  for g in 128x64 64x128; do
    timeout 25 "$B/sparge" bench --tokens 8192 --dims 256 --causal 0,1 --topk 1.0,0.2 --geometry "$g" \
      --quant int8-fp8 --heads 16 --repeat 5 --no-cudnn --json "$OUT/bench_d256_$g.json" 2>&1 | tail -6
  done
  echo "== compute-sanitizer memcheck and racecheck on the D 256 kernel tests"
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/sparge_attention_tests" --gtest_brief=1 \
    --gtest_filter='AttentionKernels.HeadDim256LongRowsAndBatches' 2>&1 | tail -3
  timeout 45 compute-sanitizer --tool racecheck --error-exitcode 9 "$B/sparge_attention_tests" --gtest_brief=1 \
    --gtest_filter='AttentionKernels.HeadDim256LongRowsAndBatches' 2>&1 | tail -3
  date -u
} 2>&1 | tee "$OUT/log.txt"
python3 -c "
import json, sys
rows = [json.load(open(f)) for f in sys.argv[1:]]
json.dump(rows, open('$OUT/bench_d256.json', 'w'), indent=1)" "$OUT"/bench_d256_*.json 2>/dev/null &&
  rm -f "$OUT"/bench_d256_*.json
ls -l "$OUT"
