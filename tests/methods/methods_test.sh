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
  expect_exit 1 "power of two" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method xattention --xattn-stride 3
  expect_exit 1 "belongs to --method moba" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method xattention --moba-topk 2
  expect_exit 1 "is SpargeAttn's" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method moba --tau 0.5
  expect_exit 1 "is not known" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method quest
  expect_exit 1 "must lie in [0, 1]" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method flexprefill --flex-gamma 1.5
  expect_exit 1 "vertical_slash" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method minference --minference-pattern a_shape
  expect_exit 1 "at least 1" -- "$SPARGE" run "$WORK/s.h5" --engine cpu --method moba --moba-topk 0
  ;;
*)
  fail "unknown case $CASE"
  ;;
esac
echo "ok: $CASE"
