#!/usr/bin/env bash
# The CUDA engine's GPU checks, from the repository root of a GPU machine with PyTorch: the engine
# tests (masks, Stage 2, the error split with quantized numerics, windows, the diagonal, cuDNN against an
# oracle), the attention kernels' and quantization tests, compute-sanitizer memcheck on the engine's own
# kernels, a profiled `sparge run` with the cuDNN baseline, and the whole-call table against SpargeAttn, torch
# SDPA and cuDNN (tools/gpu/spargeattn_compare.sh).
# Inputs: a pack made by tools/gpu/pack.sh, and a folder with SpargeAttn prebuilt for this GPU:
# spargeattn-so.tar.xz (its spas_sage_attn/*.so), spargeattn-py.tar.xz (its Python package) and the einops
# wheel it imports. Output: $OUT/engine_log.txt and $OUT/engine_results.tar.gz (JSON of every figure).
# usage: [PAUSE_MS=1000] tools/gpu/engine_check.sh [PACK_DIR=gpu-pack] [SPARGEATTN_DIR] [quick]
#   (about 6 minutes, at most 10; PAUSE_MS=1000 adds about 3, see tools/gpu/spargeattn_compare.sh)
set -uo pipefail
PACK="${1:-gpu-pack}"
SA="${2:-}"
MODE="${3:-full}"
OUT="${OUT:-$PWD/gpu-out}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK=/tmp/engine-check
mkdir -p "$OUT" "$WORK/results" /tmp/sp
# Unpacked afresh every time: a warm machine keeps /tmp, and an earlier pack's binaries must not be run.
rm -rf /tmp/sp && mkdir -p /tmp/sp && tar -xJf "$PACK/pack.tar.xz" -C /tmp/sp
export LD_LIBRARY_PATH=/tmp/sp/lib:${LD_LIBRARY_PATH:-}
B=/tmp/sp/bin
# cuDNN for the baseline: PyTorch's wheel carries libcudnn.so.9.
export SPARGE_CUDNN_LIBRARY="${SPARGE_CUDNN_LIBRARY:-$(find /opt /usr -name 'libcudnn.so.9' 2>/dev/null | head -1)}"
. "$HERE/spargeattn_env.sh"
spargeattn_env "$SA" "$WORK"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  echo "cuDNN: ${SPARGE_CUDNN_LIBRARY:-not found}"
  echo "== CUDA engine tests"
  timeout 90 $B/sparge_kernel_tests --gtest_brief=1 2>&1 | tail -30
  echo "== attention kernel and quantization tests (oracles in the tests)"
  [ -x $B/sparge_attention_tests ] && timeout 300 $B/sparge_attention_tests --gtest_brief=1 2>&1 | tail -6
  echo "== sparge run --repeat: the whole call next to our dense kernel and cuDNN (CUPTI)"
  $B/sparge synth "$WORK/s.h5" --heads 16 --tokens 8192 --dim 128 --causal >/dev/null
  timeout 40 $B/sparge run "$WORK/s.h5" --engine cuda --theta=-0.1 --topk 0.2 --block 64x128 --repeat 5 \
    --summary-only --timings "$WORK/results/timings.json" 2>&1 | tail -16
  echo "== whole call against SpargeAttn, torch SDPA and cuDNN ($MODE)"
  # PAUSE_MS and WARMUP_MS (passed on to the comparison) idle and warm up before each of its ~300 measurements.
  timeout $((180 + (${PAUSE_MS:-0} + ${WARMUP_MS:-200}) * 300 / 1000)) bash "$HERE/spargeattn_compare.sh" $B/sparge "$SRC" \
    "$WORK/results" "$MODE"
  # Last, so that the table is never the part cut short.
  echo "== memcheck: reference, error split (quantized too), windows"
  timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 $B/sparge_kernel_tests --gtest_brief=1 \
    --gtest_filter='CudaReference.*:CudaErrorSplit.*:CudaEngineWindow.*' 2>&1 | tail -4
  date -u
} 2>&1 | tee "$OUT/engine_log.txt"
tar -czf "$OUT/engine_results.tar.gz" -C "$WORK" results
