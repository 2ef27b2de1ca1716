#!/usr/bin/env bash
# The main job: install what is missing, build, and run SpargeAttn on the bundled real capture
# (SmolLM2-135M, 7 layers x 9 heads, 2048 tokens of GPL-3 text), printing the per-head tables.
# With arguments, they go to `sparge run` instead (e.g. --theta=-0.1 --topk 0.5 --engine cpu).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
BUILD="${SPARGE_BUILD_DIR:-$ROOT/build}"
SPARGE="$BUILD/cli/sparge"
"$SPARGE" info
if [ $# -gt 0 ]; then
  exec "$SPARGE" run "$@"
fi
echo
echo "=== SpargeAttn's CDF API defaults (θ 0.6, τ 0.98, λ 50) ==="
"$SPARGE" run
echo
echo "=== Similarity filter off (θ -0.1, as the top-k API), τ 0.95, λ 3, attention sink ==="
echo "    (at the defaults no 64-token K block of this model is self-similar, so every column is forced on)"
"$SPARGE" run --theta=-0.1 --tau 0.95 --lambda 3 --sink
echo
echo "=== Auto-tuned per head on layer 20 (L1 < 0.05 without PV skip, < 0.06 with it), then re-run ==="
"$SPARGE" tune --entry l20_s000 --l1 0.05 --l2 0.06 --sink -o "$BUILD/sample-params.json"
"$SPARGE" run --entry l20_s000 --params "$BUILD/sample-params.json"
