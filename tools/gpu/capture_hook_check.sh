#!/usr/bin/env bash
# Runs the capture hook's pytest on a GPU machine (torch, transformers, h5py installed; no internet):
# once on the CPU and once with the model and SDPA calls on CUDA, and opens every file it writes with
# the C++ reader. Usage, from the repository root:
#   SPARGE_BIN=/path/to/built/sparge bash tools/gpu/capture_hook_check.sh
# SPARGE_BIN must point at a built `sparge` CLI (copy it to the machine); without it the `sparge info`
# checks are skipped and the script says so.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ -z "${SPARGE_BIN:-}" ] || [ ! -x "${SPARGE_BIN}" ]; then
  echo "gpu_check: SPARGE_BIN is not set to an executable sparge binary; 'sparge info' checks will be skipped" >&2
  unset SPARGE_BIN
else
  export SPARGE_BIN="$(cd "$(dirname "$SPARGE_BIN")" && pwd)/$(basename "$SPARGE_BIN")"
fi
PY="${PYTHON:-python3}"
"$PY" -c "import torch, transformers, h5py; print('torch', torch.__version__, 'transformers', transformers.__version__, 'h5py', h5py.__version__, 'cuda', torch.cuda.is_available())"
if ! "$PY" -c "import pytest" 2>/dev/null; then
  echo "gpu_check: pytest is not installed for $PY" >&2
  exit 2
fi

export PYTHONDONTWRITEBYTECODE=1
status=0
echo "== hook tests on cpu"
SPARGE_TEST_DEVICE=cpu "$PY" -m pytest -q -rs -p no:cacheprovider tests/captures/test_capture_hook.py || status=1
echo "== hook tests on cuda"
SPARGE_TEST_DEVICE=cuda "$PY" -m pytest -q -rs -p no:cacheprovider tests/captures/test_capture_hook.py || status=1
echo "== sample integrity"
"$PY" -m pytest -q -rs -p no:cacheprovider tests/captures/test_sample.py || status=1
exit $status
