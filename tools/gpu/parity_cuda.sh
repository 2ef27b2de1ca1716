#!/usr/bin/env bash
# The CUDA engine's half of the numerics parity check, on a GPU machine: `sparge run --engine cuda` with the
# parity manifest's options (--quant int8-fp8 --block 64x128, the same θ, τ, λ) on the Whisper captures, masks
# and reports into $OUT. Afterwards, on any machine, compare them with SpargeAttn's kernel and the CPU engine:
#   python3 bench/parity_spargeattn.py --manifest WORK/manifest.json --upstream bench/results/parity_spargeattn_h100.json \
#       --reports DOWNLOADED_OUT --out cuda.json
# usage: tools/gpu/parity_cuda.sh PACK.tar.xz WORK_DIR
#   PACK.tar.xz: tools/gpu/pack.sh's pack of a CUDA build (bin/, lib/); WORK_DIR: made by
#   tools/gpu/parity_prepare.sh (manifest.json, parity/*.h5; runs whose capture is absent are skipped).
set -uo pipefail
pack="$1"; work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p /tmp/sparge-pack "${OUT:?}" && tar -xJf "$pack" -C /tmp/sparge-pack || exit 1
export LD_LIBRARY_PATH=/tmp/sparge-pack/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python3 "$here/../../bench/parity_runs.py" "$work/manifest.json" /tmp/sparge-pack/bin/sparge --engine cuda --out-dir "$OUT"
