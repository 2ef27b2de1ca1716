#!/usr/bin/env bash
# On a GPU machine: configure a CUDA build, then
# time the tuner's GPU benchmark (one entry of 32 heads x 16K tokens x D = 128) and the CPU baseline.
# usage (repository root): tools/gpu/tuner_bench.sh [build-dir]
set -euo pipefail
build="${1:-build-gpu-tuner}"
cmake -S . -B "$build" -G Ninja -DSPARGE_WITH_GUI=OFF -DSPARGE_WITH_CUDA=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target sparge_tuner_bench sparge_tuner_tests sparge
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
"$build"/tests/tuner/sparge_tuner_bench --engine cuda --heads 32 --tokens 16384 --dim 128
"$build"/tests/tuner/sparge_tuner_bench --engine cuda --heads 32 --tokens 16384 --dim 128 --block 64x128
"$build"/tests/tuner/sparge_tuner_bench --engine cuda --heads 12 --tokens 2048 --dim 64
"$build"/tests/tuner/sparge_tuner_bench --engine cpu --heads 12 --tokens 2048 --dim 64
# The CLI end to end on the CUDA engine (budgets re-checked through `sparge run --params`).
work=$(mktemp -d)
"$build"/cli/sparge synth "$work/cap.h5" --entries 2 --heads 32 --tokens 4096 --dim 128
"$build"/cli/sparge tune "$work/cap.h5" --l1 0.04 --l2 0.05 --engine cuda -o "$work/p.json"
"$build"/cli/sparge run "$work/cap.h5" --engine cuda --params "$work/p.json" --report "$work/r.json" --summary-only
python3 tests/tuner/check_report.py "$work/p.json" "$work/r.json"
