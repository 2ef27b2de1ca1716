#!/usr/bin/env bash
# End-to-end checks of token grids and permutations (docs/permutation.md). usage: permute_test.sh SPARGE CASE PYTHON
set -uo pipefail
SPARGE="$1"
CASE="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="$3"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=test_lib.sh
source "$HERE/test_lib.sh"

case "$CASE" in
annotate)
  "$SPARGE" synth "$WORK/s.h5" --heads 2 --tokens 300 --dim 32 >/dev/null || fail "synth"
  "$SPARGE" synth "$WORK/c.h5" --heads 2 --tokens 256 --dim 32 --causal >/dev/null || fail "synth causal"
  expect_exit 1 "no token grid" -- "$SPARGE" run "$WORK/s.h5" --permute hilbert --engine cpu
  expect_exit 1 "does not fit in the 300 query tokens" -- "$SPARGE" annotate "$WORK/s.h5" --entry l00 --grid 3,10,10 \
    --grid-offset 1
  expect_exit 1 "no such entry" -- "$SPARGE" annotate "$WORK/s.h5" --entry nope --grid 1,2,2
  expect_exit 1 "is not a grid" -- "$SPARGE" annotate "$WORK/s.h5" --entry l00 --grid 3,10
  expect_exit 1 "'keys' is not known" -- "$SPARGE" annotate "$WORK/s.h5" --entry l00 --grid 1,2,2 --grid-tokens keys
  expect_exit 2 "" -- "$SPARGE" annotate "$WORK/s.h5" --entry l00
  expect_exit 0 "grid 3x7x13 from token 20 (q and kv)" -- "$SPARGE" annotate "$WORK/s.h5" --entry l00 --grid 3,7,13 \
    --grid-offset 20
  expect_exit 0 "3x7x13 (20, qkv)" -- "$SPARGE" info "$WORK/s.h5"
  expect_exit 0 "tokens in hilbert order" -- "$SPARGE" run "$WORK/s.h5" --permute hilbert --engine cpu --summary-only
  expect_exit 1 "'spiral' is not known" -- "$SPARGE" run "$WORK/s.h5" --permute spiral --engine cpu
  "$SPARGE" annotate "$WORK/c.h5" --entry l00 --grid 1,16,16 >/dev/null || fail "annotate causal"
  expect_exit 1 "is causal" -- "$SPARGE" run "$WORK/c.h5" --permute timemajor --engine cpu
  expect_exit 0 "grid removed" -- "$SPARGE" annotate "$WORK/s.h5" --entry l00 --clear-grid
  expect_exit 1 "no token grid" -- "$SPARGE" run "$WORK/s.h5" --permute rowmajor --engine cpu
  ;;
run)
  # --permute none and rowmajor (the identity order) give the masks of a run without the option.
  "$SPARGE" synth "$WORK/g.h5" --grid 3,9,11 --grid-offset 13 --heads 2 --dim 32 >/dev/null || fail "synth --grid"
  common=(--engine cpu --theta=-0.1 --tau 0.9 --lambda 2 --quant none --summary-only)
  "$SPARGE" run "$WORK/g.h5" "${common[@]}" --masks "$WORK/plain.h5" >/dev/null || fail "run"
  "$SPARGE" run "$WORK/g.h5" "${common[@]}" --permute none --masks "$WORK/none.h5" >/dev/null || fail "run none"
  "$SPARGE" run "$WORK/g.h5" "${common[@]}" --permute rowmajor --masks "$WORK/rm.h5" >/dev/null || fail "run rowmajor"
  "$SPARGE" run "$WORK/g.h5" "${common[@]}" --permute hilbert --masks "$WORK/hb.h5" --report "$WORK/hb.json" \
    >/dev/null || fail "run hilbert"
  $PY - "$WORK" <<'PYEOF' || fail "masks of the orders"
import json, sys
import h5py, numpy as np
w = sys.argv[1]
def masks(name):
    with h5py.File(f"{w}/{name}.h5") as f:
        g = f["entries/l00"]
        return g["block_mask"][...], g["pv_skipped"][...], dict(g.attrs)
plain, none, rm, hb = (masks(n) for n in ("plain", "none", "rm", "hb"))
for other in (none, rm):
    assert np.array_equal(plain[0], other[0]) and np.array_equal(plain[1], other[1])
assert "permute" not in plain[2] and "permute" not in none[2]
assert rm[2]["permute"] == "rowmajor" and hb[2]["permute"] == "hilbert"
assert list(hb[2]["grid"]) == [3, 9, 11] and int(hb[2]["grid_offset"]) == 13 and hb[2]["grid_tokens"] == "qkv"
e = json.load(open(f"{w}/hb.json"))["entries"][0]
assert e["permute"] == "hilbert" and e["grid"]["shape"] == [3, 9, 11], e.get("grid")
PYEOF
  # Parameters tuned in an order record it, run in it, and refuse an entry of another grid.
  "$SPARGE" tune "$WORK/g.h5" --l1 0.05 --l2 0.06 --quant none --engine cpu --permute hilbert -o "$WORK/p.json" \
    >/dev/null 2>&1 || fail "tune --permute"
  $PY -c "import json,sys; p=json.load(open(sys.argv[1])); assert p['permute']=='hilbert', p.get('permute'); \
assert p['groups'][0]['grid']=={'shape':[3,9,11],'offset':13,'tokens':'qkv'}, p['groups'][0].get('grid')" \
    "$WORK/p.json" || fail "params.json records the order"
  expect_exit 0 "tokens in hilbert order" -- "$SPARGE" run "$WORK/g.h5" --params "$WORK/p.json" --engine cpu --summary-only
  expect_exit 1 "was tuned in hilbert token order" -- "$SPARGE" tune "$WORK/g.h5" --l1 0.05 --l2 0.06 --quant none \
    --engine cpu --resume "$WORK/p.json"
  "$SPARGE" annotate "$WORK/g.h5" --entry l00 --grid 3,11,9 --grid-offset 13 >/dev/null || fail "re-annotate"
  expect_exit 1 "its blocks would hold other tokens" -- "$SPARGE" run "$WORK/g.h5" --params "$WORK/p.json" --engine cpu
  ;;
compare)
  "$SPARGE" synth "$WORK/g.h5" --grid 4,8,16 --heads 2 --dim 32 --sharpness 3 >/dev/null || fail "synth --grid"
  out="$("$SPARGE" compare "$WORK/g.h5" --permute none,timemajor,hilbert --l1 0.05 --l2 0.06 --quant none \
    --engine cpu --report "$WORK/c.json" 2>&1)" || fail "compare: $out"
  grep -q "winner:" <<<"$out" || fail "no winner line: $out"
  "$SPARGE" compare "$WORK/g.h5" --permute none,hilbert --l1 0.05 --l2 0.06 --quant none --engine cpu \
    --report "$WORK/c.md" >/dev/null 2>&1 || fail "compare --report .md"
  grep -q "## l00" "$WORK/c.md" || fail "Markdown report"
  expect_exit 2 "given twice" -- "$SPARGE" compare "$WORK/g.h5" --permute none,none --l1 0.05 --l2 0.06
  # The self-similarity figures against a numpy transcription of Stage 1's s (K smoothed in fp16, fp16 unit
  # vectors, the mean over blocks without a partial or zero row) in the capture order and in time-major order.
  $PY - "$WORK/g.h5" "$WORK/c.json" <<'PYEOF' || fail "compare figures"
import json, sys
import h5py, numpy as np
cap, rep = sys.argv[1:3]
r = json.load(open(rep))
e = r["entries"][0]
with h5py.File(cap) as f:
    q = f["entries/l00/q"][0].astype(np.float32)
    k = f["entries/l00/k"][0].astype(np.float32)
T, H, W = 4, 8, 16
tm = np.array([(t * H + h) * W + w for h in range(H) for w in range(W) for t in range(T)])
def sims(x, block, smooth):
    if smooth:
        x = (x.astype(np.float16) - x.astype(np.float16).mean(0, dtype=np.float32).astype(np.float16)).astype(np.float32)
    out = []
    for b in range(0, len(x), block):
        blk = x[b:b + block]
        if len(blk) < block: continue
        n = np.linalg.norm(blk, axis=1)
        if np.any(n == 0): continue
        u = (blk / n[:, None]).astype(np.float16).astype(np.float32)
        out.append(float((u.sum(0) ** 2).sum() / len(blk) ** 2))
    return out
for label, order in (("none", np.arange(T * H * W)), ("timemajor", tm)):
    for head in e["heads"]:
        h = head["head"]
        got = head["variants"][label]
        sq, sk = sims(q[h][order], 128, False), sims(k[h][order], 64, True)
        assert abs(got["self_similarity_q"] - np.mean(sq)) < 2e-3, (label, h, got["self_similarity_q"], np.mean(sq))
        assert abs(got["self_similarity_k"] - np.mean(sk)) < 2e-3, (label, h, got["self_similarity_k"], np.mean(sk))
        assert got["blocks_q"] == len(sq) and got["blocks_k"] == len(sk)
for head in e["heads"]:  # the winner reaches the most sparsity
    v = head["variants"]
    best = max(v[l]["sparsity_total"] for l in v)
    assert v[head["winner"]]["sparsity_total"] == best, head
    for l in v: assert v[l]["l1"] is None or v[l]["l1"] < 0.06 + 1e-9, (l, v[l]["l1"])
PYEOF
  ;;
*)
  fail "unknown case $CASE"
  ;;
esac
