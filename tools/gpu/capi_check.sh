#!/usr/bin/env bash
# The C API and the sparge_attn package on a GPU machine with PyTorch, from the repository root: the C test
# (CUDA backend), the C API against the CUDA engine and in a CUDA graph, the fused Stage-1 + quantization kernel
# against the separate stages, the package's tests, parity with SpargeAttn on the bundled capture, and the op's
# speed against SpargeAttn's whole call (bench/capi_bench.py). Builds nothing: the binaries come from
# tools/gpu/capi_pack.sh. Every figure lands in $OUT (capi_log.txt, capi_bench.json, capi_parity.json).
# usage: tools/gpu/capi_check.sh [PACK_DIR=gpu-pack] [SPARGEATTN_DIR] [quick]
#   SPARGEATTN_DIR: as for tools/gpu/engine_check.sh, SpargeAttn prebuilt for this GPU (spargeattn-so.tar.xz,
#   spargeattn-py.tar.xz, the einops wheel); without it the SpargeAttn columns and the parity step are skipped.
#   FlashAttention-3 is timed when `import flash_attn_interface` (or fa3_fwd) works; carry its wheel in
#   PYTHONPATH. About 6 minutes (quick: 2).
set -uo pipefail
PACK="${1:-gpu-pack}"
SA="${2:-}"
MODE="${3:-full}"
OUT="${OUT:-$PWD/gpu-out}"
WORK=/tmp/capi-check
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT" "$WORK"
tar -xJf "$PACK/capi-pack.tar.xz" -C "$WORK"
export LD_LIBRARY_PATH="$WORK/lib:${LD_LIBRARY_PATH:-}"
export SPARGE_ATTN_LIBRARY="$WORK/lib/libsparge_attn.so.1" SPARGE_BIN="$WORK/bin/sparge"
export PYTHONPATH="$PWD/python:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
B="$WORK/bin"
. "$HERE/spargeattn_env.sh"
spargeattn_env "$SA" "$WORK"
SA_ARGS=()
[ -n "$SRC" ] && SA_ARGS=(--spargeattn "$SRC")
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  python3 -c "import torch, sparge_attn; print('torch', torch.__version__, '| sparge_attn', sparge_attn.version())"
  echo "== C API test in C (CPU and CUDA backends)"
  timeout 60 "$B/sparge_capi_c_test"
  echo "== C API against the CUDA engine, NHD, CUDA graph, device argument checks"
  timeout 120 "$B/sparge_capi_cuda_tests" --gtest_brief=1 2>&1 | tail -8
  echo "== fused Stage 1 + quantization against the separate stages; device block flags against the host's"
  timeout 120 "$B/sparge_kernel_tests" --gtest_brief=1 --gtest_filter='*FusedBlockPass*:*WholeCallFlags*' 2>&1 | tail -6
  echo "== the package's tests (CPU engine against the CLI, CUDA against the CPU engine, errors, torch.compile)"
  (cd "$WORK" && timeout 300 python3 -m pytest -q -rsx -p no:cacheprovider "$OLDPWD/tests/capi/test_sparge_attn.py" \
    2>&1 | tail -12)
  if [ "$MODE" != quick ] && [ -n "$SRC" ]; then
    echo "== parity with SpargeAttn on the bundled capture (per-head L1 against float64)"
    timeout 200 python3 bench/capi_parity.py captures/sample.h5 "${SA_ARGS[@]}" --json "$OUT/capi_parity.json" 2>&1 \
      | tail -8
  fi
  echo "== the op's whole call against SpargeAttn's, our dense walk, FlashAttention-3 and SDPA; CUDA graph, compile"
  Q=()
  [ "$MODE" = quick ] && Q=(--quick)
  timeout 420 python3 bench/capi_bench.py "${SA_ARGS[@]}" "${Q[@]}" --json "$OUT/capi_bench.json" 2>&1 | tail -70
  date -u
} 2>&1 | tee "$OUT/capi_log.txt"
