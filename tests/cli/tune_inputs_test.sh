#!/usr/bin/env bash
# End-to-end checks of tuning against the deployed numerics and over several inputs (docs/tuning.md):
#   exact_fallback   planted outlier keys: the hint names quantization (fallback off); with the fallback the
#                    file marks exactly those heads exact and `sparge run --params` meets the budget on every head
#   params_identity  a file tuned on one capture is refused on another (run --params, tune --resume) unless
#                    --params-any-capture; files without tuned_on still work; an entry in two groups is refused
#   tune_inputs      tuning on two captures meets the budget on each; --validate on a third agrees with
#                    `sparge run --params --params-any-capture` there
# usage: tune_inputs_test.sh SPARGE_BIN CASE PYTHON
set -uo pipefail
SPARGE="$1"
CASE="$2"
PY="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=test_lib.sh
source "$HERE/test_lib.sh"

# A small capture: one entry, 4 heads of 512 tokens (8 x 8 blocks of 64 x 64 keys at 128x64).
synth() {  # synth OUT SEED [more synth options]
  local out="$1" seed="$2"; shift 2
  "$SPARGE" synth "$out" --heads 4 --tokens 512 --dim 64 --segment 128 --sharpness 2 --seed "$seed" "$@" \
    >/dev/null || fail "synth $out"
}

case "$CASE" in
exact_fallback)
  synth "$WORK/o.h5" 5 --outlier-heads 1,3
  # Top-k: the synthetic heads are too concentrated for the CDF search (docs/tuning.md, "The search").
  out="$("$SPARGE" tune "$WORK/o.h5" --engine cpu --l1 0.05 --l2 0.06 --sink --topk-mode --exact-fallback off \
         -o "$WORK/off.json" 2>&1)" || fail "tune (fallback off): $out"
  last="$(grep "^hint:" <<<"$out" | tail -1)"
  grep -q "quantization alone costs 2 of 4 heads" <<<"$last" || fail "the hint does not name quantization: $out"
  grep -q "l00 head 1" <<<"$last" && grep -q "l00 head 3" <<<"$last" || fail "the hint does not name the heads: $last"
  grep -q -- "--exact-fallback head" <<<"$last" || fail "the hint does not say what to do: $last"
  grep -q -- "--topk-mode\|--sink" <<<"$last" && fail "the hint names another cause first: $last"
  out="$("$SPARGE" tune "$WORK/o.h5" --engine cpu --l1 0.05 --l2 0.06 --sink --topk-mode -o "$WORK/p.json" \
         2>&1)" || fail "tune: $out"
  grep -q "exact fallback (head): 2 of 4 heads tuned and recorded in exact numerics" <<<"$out" \
    || fail "no exact-fallback line: $out"
  out="$("$SPARGE" run "$WORK/o.h5" --engine cpu --params "$WORK/p.json" --report "$WORK/r.json" 2>&1)" \
    || fail "run --params: $out"
  grep -q "budget (the parameter file's deployed L1 0.06): 0 of 4 heads over" <<<"$out" || fail "budget: $out"
  $PY - "$WORK/p.json" "$WORK/r.json" "$WORK/off.json" <<'PYEOF' || fail "exact heads"
import json, sys
p, r, off = (json.load(open(a)) for a in sys.argv[1:])
assert p["exact_fallback"] == "head" and p["numerics"] == "int8-fp8", p
heads = {h["head"]: h for h in p["groups"][0]["heads"]}
# Exactly the planted heads are exact; their l1_quant (in int8-fp8) is why.
assert [h for h in sorted(heads) if heads[h].get("numerics", p["numerics"]) == "none"] == [1, 3], heads
for h in (1, 3):
    assert heads[h]["l1_quant"] >= p["l1"] and heads[h]["is_sparse"], heads[h]
for h in (0, 2):
    assert "numerics" not in heads[h] and heads[h]["l1_quant"] < p["l1"], heads[h]
# The run: every head in its numerics, every head within the deployed budget (l2).
for h in r["entries"][0]["heads"]:
    assert h["numerics"] == ("none" if h["head"] in (1, 3) else "int8-fp8"), h
    assert h["l1"] < p["l2"] and not h["over_budget"], h
    assert abs(h["l1"] - heads[h["head"]]["l1"]) <= 1e-9 * max(1.0, h["l1"]), (h, heads[h["head"]])
# Fallback off: the same heads stay quantized and dense.
offh = {h["head"]: h for h in off["groups"][0]["heads"]}
assert all("numerics" not in h for h in offh.values()) and not offh[1]["is_sparse"] and not offh[3]["is_sparse"]
PYEOF
  # The same capture with the fallback off, run back: the run names quantization as the first cause too.
  out="$("$SPARGE" run "$WORK/o.h5" --engine cpu --params "$WORK/off.json" 2>&1)" || fail "run off: $out"
  grep -q "hint: in int8-fp8 quantization alone costs 2 of 4 heads" <<<"$out" || fail "run hint: $out"
  ;;
params_identity)
  synth "$WORK/a.h5" 1
  synth "$WORK/b.h5" 2
  "$SPARGE" tune "$WORK/a.h5" --engine cpu --l1 0.05 --l2 0.06 --heads 0 1 -o "$WORK/a.json" >/dev/null 2>&1 \
    || fail "tune a"
  expect_exit 1 "--params-any-capture" -- "$SPARGE" run "$WORK/b.h5" --engine cpu --params "$WORK/a.json"
  expect_exit 1 "$WORK/b.h5:l00" -- "$SPARGE" run "$WORK/b.h5" --engine cpu --params "$WORK/a.json"
  expect_exit 1 "$WORK/a.json" -- "$SPARGE" run "$WORK/b.h5" --engine cpu --params "$WORK/a.json"
  expect_exit 0 "held-out: $WORK/b.h5:l00" -- "$SPARGE" run "$WORK/b.h5" --engine cpu --params "$WORK/a.json" \
    --params-any-capture
  expect_exit 0 "" -- "$SPARGE" run "$WORK/a.h5" --engine cpu --params "$WORK/a.json"
  # A copy of the capture is the same input (the digest is of the content).
  cp "$WORK/a.h5" "$WORK/copy.h5"
  expect_exit 0 "" -- "$SPARGE" run "$WORK/copy.h5" --engine cpu --params "$WORK/a.json"
  # --resume refuses to keep heads tuned on another capture ("2 heads kept, 0 to tune" before).
  expect_exit 1 "was tuned on $WORK/a.h5:l00, not on $WORK/b.h5:l00" -- \
    "$SPARGE" tune "$WORK/b.h5" --engine cpu --l1 0.05 --l2 0.06 --heads 0 1 --resume "$WORK/a.json" \
    -o "$WORK/b.json"
  [ -e "$WORK/b.json" ] && fail "a refused resume wrote its output"
  # Older files (no tuned_on) keep working, with a warning; an entry listed in two groups is refused.
  $PY - "$WORK/a.json" "$WORK/old.json" "$WORK/dup.json" <<'PYEOF' || fail "edit files"
import copy, json, sys
p = json.load(open(sys.argv[1]))
old = copy.deepcopy(p)
for g in old["groups"]:
    g.pop("tuned_on")
json.dump(old, open(sys.argv[2], "w"))
dup = copy.deepcopy(old)
g2 = copy.deepcopy(dup["groups"][0])
g2["name"] = "again"
dup["groups"].append(g2)
json.dump(dup, open(sys.argv[3], "w"))
PYEOF
  expect_exit 0 "tuned_on" -- "$SPARGE" run "$WORK/b.h5" --engine cpu --params "$WORK/old.json"
  expect_exit 1 "is listed in group \"l00\" and in group \"again\"" -- \
    "$SPARGE" run "$WORK/a.h5" --engine cpu --params "$WORK/dup.json"
  expect_exit 1 "listed in group" -- "$SPARGE" tune "$WORK/a.h5" --engine cpu --l1 0.05 --l2 0.06 --heads 0 \
    --resume "$WORK/dup.json" -o "$WORK/d2.json"
  ;;
tune_inputs)
  synth "$WORK/a.h5" 11
  synth "$WORK/b.h5" 12
  synth "$WORK/c.h5" 13
  out="$("$SPARGE" tune "$WORK/a.h5" "$WORK/b.h5" --engine cpu --l1 0.05 --l2 0.06 --sink \
         --validate "$WORK/c.h5" -o "$WORK/ab.json" 2>&1)" || fail "tune a b: $out"
  grep -q "held-out:" <<<"$out" || fail "no held-out summary: $out"
  for cap in a b; do
    "$SPARGE" run "$WORK/$cap.h5" --engine cpu --params "$WORK/ab.json" --report "$WORK/r_$cap.json" \
      >/dev/null 2>&1 || fail "run $cap --params"
  done
  "$SPARGE" run "$WORK/c.h5" --engine cpu --params "$WORK/ab.json" --params-any-capture \
    --report "$WORK/r_c.json" >/dev/null 2>&1 || fail "run c --params-any-capture"
  $PY - "$WORK" <<'PYEOF' || fail "several inputs / held-out"
import json, sys, os
w = sys.argv[1]
p = json.load(open(os.path.join(w, "ab.json")))
budget = p["l2"]
g = p["groups"][0]
assert [t["capture"] for t in g["tuned_on"]] == [os.path.join(w, "a.h5"), os.path.join(w, "b.h5")], g["tuned_on"]
assert len({t["digest"] for t in g["tuned_on"]}) == 2, g["tuned_on"]
stored = {h["head"]: h for h in g["heads"]}
runs = {cap: {h["head"]: h for h in json.load(open(os.path.join(w, f"r_{cap}.json")))["entries"][0]["heads"]}
        for cap in "abc"}
for head, h in stored.items():
    # The stored L1 is the larger of the two inputs', and both meet the budget.
    la, lb = runs["a"][head]["l1"], runs["b"][head]["l1"]
    assert la < budget and lb < budget, (head, la, lb, budget)
    assert abs(h["l1"] - max(la, lb)) <= 1e-9 * max(1.0, h["l1"]), (head, h["l1"], la, lb)
    # Held out on c: what --validate recorded is what run --params-any-capture measures there.
    ho, lc = h["held_out"], runs["c"][head]["l1"]
    assert ho["inputs"] == 1 and ho["max_l1_entry"] == os.path.join(w, "c.h5") + ":l00", ho
    assert abs(ho["max_l1"] - lc) <= 1e-9 * max(1.0, lc), (head, ho, lc)
    assert ho["violations"] == (1 if lc > budget else 0), (head, ho, lc, budget)
    assert runs["c"][head]["over_budget"] == (lc > budget)
assert json.load(open(os.path.join(w, "r_c.json")))["entries"][0]["held_out"] is True
PYEOF
  ;;
*)
  fail "unknown case $CASE"
  ;;
esac
echo "ok: $CASE"
