#!/usr/bin/env bash
# End-to-end: sparge synth → sparge tune → sparge run --params → every head of the report meets the
# budget stored in the parameter file, with exactly the stored parameters (exact numerics: the synthetic
# capture's INT8/FP8 quantization error alone is about the budget).
# usage: e2e_tune.sh SPARGE PYTHON CHECK_SCRIPT WORKDIR
set -euo pipefail
sparge="$1"; python="$2"; check="$3"; work="$4"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
"$sparge" synth cap.h5 --entries 2 --heads 4 --tokens 1024 --dim 64 --seed 3
"$sparge" tune cap.h5 --l1 0.04 --l2 0.05 --quant none --engine cpu -o p.json
"$sparge" run cap.h5 --engine cpu --params p.json --report r.json --summary-only
"$python" "$check" p.json r.json
# The same with λ fixed and the top-k search on the other geometry.
"$sparge" tune cap.h5 --l1 0.04 --no-tune-pv --topk-mode --block 64x128 --quant none --engine cpu -o pk.json
"$sparge" run cap.h5 --engine cpu --params pk.json --report rk.json --summary-only
"$python" "$check" pk.json rk.json
