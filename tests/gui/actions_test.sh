#!/usr/bin/env bash
# Runs every File/Run action of sparge-studio headless (EGL, no X server) on a small synthetic capture:
# exports (masks, reports, parameters), auto-tune (head / entry / all, cancel, follow budget), profile,
# parameter import, presets, the overview (filled), the curves (swept) and the kernel view; then checks the
# files with check_exports.py and re-runs the exported parameters through `sparge run --params`.
set -euo pipefail
app=$1 sparge=$2 python=$3 checker=$4 out=$5
rm -rf "$out"
mkdir -p "$out"
export XDG_CONFIG_HOME="$out/config"   # never touch the user's settings
"$sparge" synth "$out/x.h5" --entries 2 --heads 4 --tokens 512 --dim 32 --causal --seed 3 >/dev/null

env -u DISPLAY "$app" "$out/x.h5" --backend egl --engine cpu --threads 2 --timeout 500 --size 1280x800 \
  --set sink=1 --set theta=-1 --set tau=0.9 --set l1=0.07 --set l2=0.08 \
  --action export-masks="$out/masks.h5" \
  --action export-report="$out/report.json" \
  --action export-report="$out/report.csv" \
  --action export-report="$out/report.md" \
  --action select-head=2 \
  --action tune=head \
  --action tune=entry \
  --action export-params="$out/params.json" \
  --action tune-cancel=entry \
  --action profile=2,150 \
  --action follow=1 \
  --action set=l1=0.06 \
  --action follow=0 \
  --action tune=all \
  --action export-params="$out/params_all.json" \
  --action set=theta=0.5 \
  --action load-params="$out/params.json" \
  --action export-report="$out/after_load.json" \
  --action preset=filter-off \
  --action view=overview \
  --action sweep=head \
  --action sweep=all \
  --action view=kernels:centre-bottom \
  --action preset=stored \
  --screenshot "$out/final.png"

# The exported parameters, re-run by the CLI: every head must reproduce its recorded L1 within budget.
"$sparge" run "$out/x.h5" --engine cpu --params "$out/params.json" --entry l00 --report "$out/rerun.json" >/dev/null
"$sparge" run "$out/x.h5" --engine cpu --params "$out/params_all.json" --report "$out/rerun_all.json" >/dev/null
"$python" "$checker" "$out"
