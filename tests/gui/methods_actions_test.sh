#!/usr/bin/env bash
# The GUI's block predictors headless (EGL, docs/methods.md): method=xattention with its threshold set through
# the controls, the run's mask checked against `sparge run` with the same method and parameters; the curves
# overlay of every method on one head (sweep=methods); and the overview coloured by the best method
# (compare-methods: every entry compared, one winner per head).
set -euo pipefail
app=$1 sparge=$2 python=$3 out=$4
rm -rf "$out"
mkdir -p "$out"
export XDG_CONFIG_HOME="$out/config"
"$sparge" synth "$out/s.h5" --entries 3 --heads 3 --tokens 512 --dim 32 --causal --sharpness 3 >/dev/null

env -u DISPLAY "$app" "$out/s.h5" --backend egl --engine cpu --threads 2 --timeout 500 --size 1280x800 \
  --set quant=none --set l1=0.05 --set l2=0.06 --set method=xattention --set xattn_threshold=0.8 \
  --action export-masks="$out/masks.h5" \
  --action sweep=methods \
  --screenshot "$out/methods_curves.png"
"$sparge" run "$out/s.h5" --entry l00 --engine cpu --quant none --method xattention --xattn-threshold 0.8 \
  --masks "$out/cli_masks.h5" >/dev/null
"$python" - "$out" <<'PYEOF'
import sys
import h5py
import numpy as np
out = sys.argv[1]
with h5py.File(f"{out}/masks.h5") as a, h5py.File(f"{out}/cli_masks.h5") as b:
    ga, gb = a["entries/l00"], b["entries/l00"]
    assert ga.attrs["method"] == "xattention", dict(ga.attrs)
    assert np.array_equal(ga["block_mask"][...], gb["block_mask"][...]), "GUI and CLI masks differ"
PYEOF

env -u DISPLAY "$app" "$out/s.h5" --backend egl --engine cpu --threads 2 --timeout 500 --size 1280x800 \
  --set quant=none --set l1=0.05 --set l2=0.06 \
  --action compare-methods \
  --screenshot "$out/methods_overview.png"
