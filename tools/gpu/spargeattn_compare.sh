#!/usr/bin/env bash
# On a GPU machine with PyTorch: builds SpargeAttn from a source folder (once; its code stays outside this
# repository), runs `sparge bench` for the exact and the int8-fp8 whole call, and prints the side-by-side table
# of bench/compare_spargeattn.py (ours / SpargeAttn / torch SDPA / cuDNN). Everything is logged to OUTDIR.
# usage: tools/gpu/spargeattn_compare.sh SPARGE_BINARY SPARGEATTN_DIR OUTDIR [quick]
#   SPARGEATTN_DIR: SpargeAttn's source tree (built in place here when spas_sage_attn/_qattn*.so is missing:
#   about 4 minutes on 16 cores), or "" for no SpargeAttn column
#   quick: N 8K, D 128, top-k 1.0 and 0.2 only (a shake-out run)
# PAUSE_MS (environment, default 0): idle time before each timed measurement, ours and SpargeAttn's alike
# (`sparge bench --pause-ms`): right after a heavy measurement the next one ran slower in the same process.
# WARMUP_MS (environment, default 200): untimed running before each timed measurement, at least, ours and
# SpargeAttn's alike (`sparge bench --warmup-ms`): each then starts in the state sustained load leaves the GPU
# in, not in whatever state the measurement before or the pause left.
set -uo pipefail
SPARGE="$1"
SRC="$2"
OUT="$3"
QUICK="${4:-}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"

build_spargeattn() {
  [ -n "$SRC" ] || return 1
  if ls "$SRC"/spas_sage_attn/_qattn*.so >/dev/null 2>&1; then return 0; fi
  echo "== building SpargeAttn in $SRC"
  # Its setup.py forces a header that newer toolkits reject, and reads a README.md it does not ship here.
  sed -i 's/"-Xcompiler", "-include,cassert",//' "$SRC/setup.py"
  [ -f "$SRC/README.md" ] || echo "SpargeAttn" >"$SRC/README.md"
  (cd "$SRC" && TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=14 python3 setup.py build_ext --inplace) \
    >"$OUT/spargeattn-build.log" 2>&1 || { tail -20 "$OUT/spargeattn-build.log"; return 1; }
}

T=$(date +%s)
build_spargeattn && echo "SpargeAttn ready in $(($(date +%s) - T)) s"

if [ "$QUICK" = quick ]; then
  SWEEPS=("--tokens 8192 --causal 0 --dims 128 --topk 1,0.2")
else
  SWEEPS=("--tokens 8192,16384,32768 --causal 0 --dims 128,64 --topk 1,0.5,0.2,0.1"
          "--tokens 16384,32768 --causal 1 --dims 128,64 --topk 1,0.5,0.2,0.1")
fi
FILES=()
for quant in none int8-fp8; do
  extra=""
  [ "$quant" = none ] || extra="--no-cudnn"  # cuDNN is timed once, next to the exact path
  i=0
  for sweep in "${SWEEPS[@]}"; do
    f="$OUT/ours-$quant-$i.json"
    # shellcheck disable=SC2086
    if "$SPARGE" bench --quant "$quant" $sweep $extra --pause-ms "${PAUSE_MS:-0}" \
      --warmup-ms "${WARMUP_MS:-200}" --json "$f" \
      >"$OUT/ours-$quant-$i.log" 2>&1; then
      FILES+=("$f")
    else
      echo "sparge bench --quant $quant failed: $(tail -2 "$OUT/ours-$quant-$i.log")"
    fi
    i=$((i + 1))
  done
done
SA_ARGS=()
[ -n "$SRC" ] && SA_ARGS=(--spargeattn "$SRC")
PYTHONUNBUFFERED=1 python3 "$HERE/../../bench/compare_spargeattn.py" "${FILES[@]}" "${SA_ARGS[@]}" --pause-ms "${PAUSE_MS:-0}" \
  --warmup-ms "${WARMUP_MS:-200}" --json "$OUT/compare.json"
