#!/usr/bin/env bash
# A parameter file with exact heads and held-out figures, and an evaluation report beside it, loaded into
# sparge-studio headless (EGL): the load actions succeed (the app checks the parameters and the report were
# taken), the head grid and the overview render with their marks, and a malformed report is a failed action
# (exit 4), never a crash.
set -uo pipefail
app=$1 sparge=$2 out=$3
rm -rf "$out"
mkdir -p "$out"
export XDG_CONFIG_HOME="$out/config"   # never touch the user's settings
fail() { echo "FAIL: $*" >&2; exit 1; }
for seed in 5 6; do
  "$sparge" synth "$out/o$seed.h5" --heads 4 --tokens 512 --dim 64 --segment 128 --sharpness 2 --seed $seed \
    --outlier-heads 1 >/dev/null || fail "synth"
done
"$sparge" tune "$out/o5.h5" --engine cpu --l1 0.05 --l2 0.06 --sink --topk-mode --validate "$out/o6.h5" \
  -o "$out/p.json" >/dev/null 2>&1 || fail "tune"
cat > "$out/p.eval.json" <<'JSON'
{"sparge_eval_version": 1, "generator": "sparge-eval", "params": "p.json", "engine": "reference",
 "numerics": "int8-fp8", "device": "cpu", "model": {"name": "synthetic", "kind": "causal-lm"},
 "summary": {"metric": "perplexity", "dense": 12.31, "sparse": 12.45, "relative_change": 0.0114,
             "top1_agreement": 0.987, "mean_kl": 0.0123, "inputs": 3,
             "line": "perplexity 12.31 → 12.45 (+1.1 %), top-1 agreement 98.7 %, 3 held-out inputs"},
 "heads": [{"entry": "l00", "layer": 0, "head": 2, "l1": 0.071, "l1_max": 0.083, "budget_l1": 0.06,
            "over_budget": true, "inputs": 3}]}
JSON
common=("$out/o5.h5" --backend egl --engine cpu --threads 2 --timeout 300 --size 1600x1000 --set sink=1)
env -u DISPLAY "$app" "${common[@]}" --action load-params="$out/p.json" --action select-head=1 \
  --screenshot "$out/heads.png" || fail "load the parameters (and the report beside them)"
env -u DISPLAY "$app" "${common[@]}" --action load-params="$out/p.json" --action load-eval="$out/p.eval.json" \
  --action view=overview --screenshot "$out/overview.png" || fail "load the report, show the overview"
echo '{"sparge_eval_version": 1, "summary": {}}' > "$out/bad.eval.json"
env -u DISPLAY "$app" "${common[@]}" --action load-eval="$out/bad.eval.json" >"$out/bad.log" 2>&1
rc=$?
[ "$rc" -eq 4 ] || fail "a malformed report: exit $rc, expected 4 (a failed action); $(cat "$out/bad.log")"
grep -q "bad.eval.json:/summary/metric" "$out/bad.log" || fail "the error does not name the path: $(cat "$out/bad.log")"
echo "ok"
