#!/usr/bin/env bash
# End-to-end tests of the block predictors (docs/methods.md). usage: methods_test.sh SPARGE CASE [PYTHON]
set -uo pipefail
SPARGE="$1"
CASE="$2"
PY="${3:-python3}"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
# shellcheck source=../cli/test_lib.sh
source "$ROOT/tests/cli/test_lib.sh"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
SAMPLE="$ROOT/captures/sample.h5"

# Runs `sparge run` with the given options and checks its masks (and element densities) against the oracle.
check_oracle() {  # check_oracle MAX_DIFF CAPTURE ARGS...
  local maxdiff="$1" capture="$2"; shift 2
  "$SPARGE" run "$capture" --engine cpu --quant none "$@" --masks "$WORK/m.h5" --report "$WORK/r.json" \
    >"$WORK/run.log" 2>&1 || fail "run $*: $(cat "$WORK/run.log")"
  $PY "$HERE/method_reference.py" "$capture" "$WORK/m.h5" --report "$WORK/r.json" --max-diff "$maxdiff" \
    || fail "oracle with $*"
}

case "$CASE" in
oracle_random)
  # GQA, partial blocks, causal and bidirectional entries, sliding and local windows, NHD and bfloat16 inputs,
  # both tile geometries, several settings of each method. Random keys give many nearly equal line, gate and
  # block scores, so up to 2 % of the blocks may differ at near-ties (every difference must be one).
  $PY "$HERE/make_random_capture.py" "$WORK/rand.h5" || fail "write random capture"
  for args in "--method xattention" "--method xattention --xattn-threshold 0.6 --xattn-stride 16" \
              "--method xattention --xattn-threshold 0.95 --xattn-stride 4 --block 64x128" \
              "--method minference" "--method minference --minference-vertical 40 --minference-slash 120" \
              "--method minference --minference-pattern block_sparse --minference-topk 3 --block 64x128" \
              "--method flexprefill --flex-gamma 0.8" "--method flexprefill --flex-gamma 0.95 --flex-tau 0.3" \
              "--method flexprefill --flex-gamma 0.7 --flex-tau 0 --block 64x128" \
              "--method moba --moba-topk 2" "--method moba --moba-topk 4 --block 64x128 --sink" \
              "--method xattention --xattn-threshold 0.8 --diagonal"; do
    # shellcheck disable=SC2086
    check_oracle 0.02 "$WORK/rand.h5" $args
  done
  ;;
oracle_sample)
  # The bundled real capture (SmolLM2, causal, GQA 9/3), two layers.
  for args in "--method xattention --xattn-threshold 0.9" "--method minference --minference-vertical 100 --minference-slash 300" \
              "--method flexprefill --flex-gamma 0.9" "--method moba --moba-topk 3"; do
    # shellcheck disable=SC2086
    check_oracle 0.001 "$SAMPLE" --entry l00_s000 --entry l20_s000 $args
  done
  ;;
options)
  "$SPARGE" synth "$WORK/s.h5" --heads 2 --tokens 256 --dim 32 >/dev/null || fail "synth"
  expect_exit 2 "power of two" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method xattention --xattn-stride 3
  expect_exit 2 "belongs to --method moba" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method xattention --moba-topk 2
  expect_exit 2 "is SpargeAttn's" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method moba --tau 0.5
  expect_exit 2 "is not known" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method quest
  expect_exit 2 "must lie in [0, 1]" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method flexprefill --flex-gamma 1.5
  expect_exit 2 "vertical_slash" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method minference --minference-pattern a_shape
  expect_exit 2 "at least 1" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method moba --moba-topk 0
  ;;
tune)
  # A method's tuned parameter file carries the method; run --params reproduces it; --resume and run refuse
  # another method.
  $PY "$HERE/make_planted_capture.py" "$WORK/p.h5" 1024 || fail "write planted capture"
  "$SPARGE" tune "$WORK/p.h5" --engine cpu --quant none --method moba --l1 0.05 --no-tune-pv -o "$WORK/moba.json" \
    >"$WORK/tune.log" 2>&1 || fail "tune: $(cat "$WORK/tune.log")"
  $PY -c "import json,sys; p=json.load(open(sys.argv[1])); assert p['method']=='moba', p.get('method')" \
    "$WORK/moba.json" || fail "params.json does not carry the method"
  "$SPARGE" run "$WORK/p.h5" --engine cpu --params "$WORK/moba.json" --report "$WORK/r.json" >/dev/null 2>&1 \
    || fail "run --params"
  $PY -c "import json,sys; e=json.load(open(sys.argv[1]))['entries'][0]; assert e['method']=='moba', e['method']" \
    "$WORK/r.json" || fail "run --params did not run the file's method"
  expect_exit 1 "moba" -- "$SPARGE" run "$WORK/p.h5" --engine cpu --params "$WORK/moba.json" --method xattention
  ;;
compare)
  # Planted heads whose winners are known by construction (make_planted_capture.py); Stage 1 alone (no PV
  # skip) so that the predictors are compared; each method's figures against its own tune + run --params.
  $PY "$HERE/make_planted_capture.py" "$WORK/p.h5" || fail "write planted capture"
  common=(--engine cpu --quant none --l1 0.05 --no-tune-pv)
  "$SPARGE" compare "$WORK/p.h5" "${common[@]}" --methods spargeattn,xattention,minference,flexprefill,moba \
    --report "$WORK/cmp.json" >"$WORK/cmp.log" 2>&1 || fail "compare: $(cat "$WORK/cmp.log")"
  grep -q "of dense" "$WORK/cmp.log" || fail "no Stage 1 share in the table: $(cat "$WORK/cmp.log")"
  runs=()
  for m in spargeattn xattention minference flexprefill moba; do
    "$SPARGE" tune "$WORK/p.h5" "${common[@]}" --method "$m" -o "$WORK/$m.json" >/dev/null 2>&1 || fail "tune $m"
    "$SPARGE" run "$WORK/p.h5" --engine cpu --params "$WORK/$m.json" --method "$m" --report "$WORK/run_$m.json" \
      >/dev/null 2>&1 || fail "run --params $m"
    runs+=("$m=$WORK/run_$m.json")
  done
  $PY "$HERE/check_compare.py" "$WORK/cmp.json" "${runs[@]}" || fail "compare report"
  # CSV and Markdown reports, one method on one head (quick).
  "$SPARGE" compare "$WORK/p.h5" "${common[@]}" --methods moba --heads 1 --report "$WORK/c.csv" >/dev/null 2>&1 \
    || fail "compare --report csv"
  head -1 "$WORK/c.csv" | grep -q "^entry,head,variant,permute,method,params,sparsity_stage1,sparsity_total" \
    || fail "csv header: $(head -1 "$WORK/c.csv")"
  grep -q "^planted,1,none,none,moba," "$WORK/c.csv" && grep -q "^planted,all,none,none,moba," "$WORK/c.csv" \
    || fail "csv rows: $(cat "$WORK/c.csv")"
  "$SPARGE" compare "$WORK/p.h5" "${common[@]}" --methods moba,xattention --heads 1 --report "$WORK/c.md" \
    >/dev/null 2>&1 || fail "compare --report md"
  grep -q "of dense" "$WORK/c.md" || fail "markdown: $(cat "$WORK/c.md")"
  # Usage errors (2, before any work): unknown and empty method lists, budgets; a capture without what the
  # orders need (1).
  expect_exit 2 "is not known" -- "$SPARGE" compare "$WORK/p.h5" --engine cpu --l1 0.05 --no-tune-pv --methods moba,quest
  expect_exit 2 "--methods" -- "$SPARGE" compare "$WORK/p.h5" --engine cpu --l1 0.05 --no-tune-pv --methods ""
  expect_exit 2 "l2 must be larger than l1" -- "$SPARGE" compare "$WORK/p.h5" --engine cpu --l1 0.05 --l2 0.01 --methods moba
  expect_exit 2 "l1 must be a positive number" -- "$SPARGE" compare "$WORK/p.h5" --engine cpu --l1 -1 --no-tune-pv --methods moba
  expect_exit 1 "no entry has a token grid" -- "$SPARGE" compare "$WORK/p.h5" --engine cpu --l1 0.05 --no-tune-pv
  ;;
*)
  fail "unknown case $CASE"
  ;;
esac
echo "ok: $CASE"
