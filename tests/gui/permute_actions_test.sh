#!/usr/bin/env bash
# The GUI's token orders headless (EGL): permute=hilbert on a grid capture, the head detail in the capture's
# order, the curves overlay of the orders (sweep=orders), masks and parameters exported in that order; and
# permute= refused (exit 4) on a capture without a grid.
set -euo pipefail
app=$1 sparge=$2 python=$3 out=$4
rm -rf "$out"
mkdir -p "$out"
export XDG_CONFIG_HOME="$out/config"
"$sparge" synth "$out/g.h5" --grid 2,8,16 --heads 2 --dim 32 --sharpness 3 >/dev/null
"$sparge" synth "$out/plain.h5" --heads 2 --tokens 256 --dim 32 >/dev/null

env -u DISPLAY "$app" "$out/g.h5" --backend egl --engine cpu --threads 2 --timeout 500 --size 1280x800 \
  --set theta=-0.1 --set tau=0.9 --set quant=none --set l1=0.05 --set l2=0.06 \
  --action permute=hilbert \
  --action capture-order=1 \
  --action export-masks="$out/masks.h5" \
  --action export-params="$out/params.json" \
  --action sweep=orders \
  --screenshot "$out/orders.png"

"$python" - "$out" <<'PYEOF'
import json, sys
import h5py
out = sys.argv[1]
with h5py.File(f"{out}/masks.h5") as f:
    g = f["entries/l00"]
    assert g.attrs["permute"] == "hilbert", dict(g.attrs)
    assert list(g.attrs["grid"]) == [2, 8, 16]
p = json.load(open(f"{out}/params.json"))
assert p["permute"] == "hilbert" and p["groups"][0]["grid"]["shape"] == [2, 8, 16], p.get("permute")
PYEOF
summary="$("$sparge" run "$out/g.h5" --params "$out/params.json" --engine cpu --summary-only)"
grep -q "tokens in hilbert order" <<<"$summary"

set +e
env -u DISPLAY "$app" "$out/plain.h5" --backend egl --engine cpu --timeout 300 --action permute=hilbert \
  >"$out/refused.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 4 ] || { echo "permute=hilbert on a capture without a grid exited $rc, expected 4"; exit 1; }
grep -q "no token grid" "$out/refused.txt" || { echo "no reason given: $(cat "$out/refused.txt")"; exit 1; }
echo "permute actions ok"
