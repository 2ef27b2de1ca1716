#!/usr/bin/env bash
# End-to-end checks of sparge under mpirun on the CPU engine: the same parameter file (byte for byte) and
# the same report numbers as one process, whatever the number of ranks, with pieces handed out from a queue
# or (SPARGE_STATIC_PLAN=1) fixed up front; a failing rank is named with its host and entry, finished groups
# are kept (a partly tuned one marked incomplete) and --resume finishes the file to exactly what an
# uninterrupted run writes; the output and memory checks hold under mpirun.
# usage: mpi_test.sh SPARGE_BIN CASE MPIRUN PYTHON
set -uo pipefail
SPARGE="$1"
CASE="$2"
MPIRUN="$3"
PY="$4"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# CI runs as root; Open MPI refuses that without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Keep Open MPI off networks the CI machine may not have; every rank runs on this host.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi() {  # mpi N ARGS...: sparge on N ranks of this host
  local n="$1"; shift
  "$MPIRUN" --oversubscribe -np "$n" "$SPARGE" "$@"
}
TUNE=(--l1 0.04 --l2 0.05 --engine cpu --quant none)  # exact: the synthetic capture's INT8/FP8 error alone is ~0.04

# A reference parameter file from one process with one thread (each rank of a 2-core CI machine gets
# one thread too, and the engine's name is part of the file).
reference() {  # reference CAPTURE OUT
  "$SPARGE" tune "$1" "${TUNE[@]}" --threads 1 -o "$2" >"$WORK/ref.log" 2>&1 || fail "one-process tune: $(cat "$WORK/ref.log")"
}
same_file() {  # same_file A B WHAT
  cmp -s "$1" "$2" || fail "$3: $(diff <($PY -m json.tool "$1") <($PY -m json.tool "$2") | head -20)"
}

# Each rank's time line: its pieces add up to the plan's, its engine runs to the job's.
check_rank_lines() {  # check_rank_lines RANKS (reads log)
  local line='^  rank [0-9]*: [0-9.]* s, \([0-9]*\) pieces\{0,1\} (first piece [0-9.]* s, loading entries [0-9.]* s, coordination [0-9.]* s), \([0-9]*\) engine runs; before them [0-9.]* s of start-up (engine [0-9.]* s)$'
  local total plan pieces runs
  total=$(sed -n 's/.* \([0-9][0-9]*\) engine runs; parameters written.*/\1/p' log)
  plan=$(sed -n 's/^plan: [0-9]* groups in \([0-9]*\) pieces over .*/\1/p' log)
  pieces=$(sed -n "s/$line/\1/p" log)
  runs=$(sed -n "s/$line/\2/p" log)
  [ -n "$total" ] && [ -n "$plan" ] && [ "$(wc -l <<<"$runs")" -eq "$1" ] || fail "per-rank time lines missing: $(cat log)"
  [ "$(( $(paste -sd+ <<<"$runs") ))" -eq "$total" ] || fail "ranks' engine runs ($runs) do not add up to $total"
  [ "$(( $(paste -sd+ <<<"$pieces") ))" -eq "$plan" ] || fail "ranks' pieces ($pieces) do not add up to the plan's $plan"
}

cd "$WORK"
case "$CASE" in
no_plugin)
  # A launcher that announces two processes, but no MPI transport: refuse, do not run the job twice.
  out="$(OMPI_COMM_WORLD_SIZE=2 SPARGE_MPI_PLUGIN="$WORK/absent.so" "$SPARGE" info 2>&1)"; rc=$?
  [ "$rc" -eq 1 ] || fail "expected exit 1, got $rc: $out"
  grep -q "no MPI support" <<<"$out" || fail "message should say MPI is missing: $out"
  # srun with several tasks but no PMI cannot form one job either.
  out="$(SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=4 "$SPARGE" info 2>&1)"; rc=$?
  [ "$rc" -eq 1 ] && grep -q -- "--mpi=pmix" <<<"$out" || fail "srun without PMI: $rc $out"
  ;;
tune_np2)
  "$SPARGE" synth cap.h5 --entries 3 --heads 4 --tokens 1024 --dim 64 --seed 3 >/dev/null || fail synth
  reference cap.h5 one.json
  mpi 2 tune cap.h5 "${TUNE[@]}" -o two.json >log 2>&1 || fail "mpirun -np 2 tune: $(cat log)"
  grep -q "2 ranks on 1 host" log || fail "rank summary missing: $(cat log)"
  same_file one.json two.json "2 ranks wrote another parameter file than one process"
  check_rank_lines 2
  # With the probe traces too.
  "$SPARGE" tune cap.h5 "${TUNE[@]}" --threads 1 --trace -o one_t.json >/dev/null 2>&1 || fail "trace tune"
  mpi 2 tune cap.h5 "${TUNE[@]}" --trace -o two_t.json >log 2>&1 || fail "mpirun trace tune: $(cat log)"
  same_file one_t.json two_t.json "traces differ"
  ;;
tune_np3_fewer_entries)
  # 2 entries on 3 ranks: the entries' heads are split over the ranks.
  "$SPARGE" synth cap.h5 --entries 2 --heads 4 --tokens 1024 --dim 64 --seed 5 --causal >/dev/null || fail synth
  reference cap.h5 one.json
  mpi 3 tune cap.h5 "${TUNE[@]}" -o three.json >log 2>&1 || fail "mpirun -np 3 tune: $(cat log)"
  grep -q "pieces over 3 ranks" log || fail "plan line missing: $(cat log)"
  same_file one.json three.json "3 ranks wrote another parameter file than one process"
  ;;
tune_np3_queue)
  # 9 entries x 4 heads on 3 ranks: the queue holds the 9 whole entries; each rank starts with 2, the other
  # 3 are handed out on request; the file is the one of one process. With SPARGE_STATIC_PLAN=1 the fixed plan
  # (3 whole entries a rank) gives the same file.
  "$SPARGE" synth cap.h5 --entries 9 --heads 4 --tokens 768 --dim 64 --seed 6 >/dev/null || fail synth
  reference cap.h5 one.json
  mpi 3 tune cap.h5 "${TUNE[@]}" -o three.json >log 2>&1 || fail "mpirun -np 3 tune: $(cat log)"
  grep -q "^plan: 9 groups in 9 pieces over 3 ranks, handed out as ranks become free" log || fail "plan line: $(cat log)"
  check_rank_lines 3
  same_file one.json three.json "3 ranks (queue) wrote another parameter file than one process"
  SPARGE_STATIC_PLAN=1 mpi 3 tune cap.h5 "${TUNE[@]}" -o fixed.json >log 2>&1 || fail "static plan: $(cat log)"
  grep -q "^plan: 9 groups in 9 pieces over 3 ranks, estimated load imbalance 1.00" log || fail "static plan line: $(cat log)"
  check_rank_lines 3
  same_file one.json fixed.json "3 ranks (static plan) wrote another parameter file than one process"
  # Ranks that disagree on the schedule (SPARGE_STATIC_PLAN on some hosts only) would send pieces of another
  # job: rank 0 refuses them and names the rank.
  "$MPIRUN" --oversubscribe -np 1 "$SPARGE" tune cap.h5 "${TUNE[@]}" -o mixed.json : \
    -np 2 env SPARGE_STATIC_PLAN=1 "$SPARGE" tune cap.h5 "${TUNE[@]}" -o mixed.json >log 2>&1 \
    && fail "ranks with different schedules accepted: $(cat log)"
  grep -qE "error: rank [12] \([^)]*\) failed: its pieces are a fixed plan of 9 pieces, rank 0's a queue of 9 pieces" log \
    || fail "schedule mismatch message: $(cat log)"
  ;;
run_np3)
  "$SPARGE" synth cap.h5 --entries 2 --heads 4 --tokens 768 --dim 64 --seed 9 >/dev/null || fail synth
  "$SPARGE" run cap.h5 --engine cpu --theta=-0.1 --sink --report one.json --masks one.h5 --summary-only \
    >/dev/null 2>&1 || fail "one-process run"
  mpi 3 run cap.h5 --engine cpu --theta=-0.1 --sink --report three.json --masks three.h5 --summary-only \
    >log 2>&1 || fail "mpirun -np 3 run: $(cat log)"
  $PY - one.json three.json one.h5 three.h5 <<'PYEOF' || fail "run results differ"
import json, sys
import h5py, numpy as np
def numbers(x):  # every figure of the report except times and the engine name
    if isinstance(x, dict):
        return {k: numbers(v) for k, v in x.items() if not (k.endswith("_ms") or k in ("times", "engine", "warnings"))}
    if isinstance(x, list):
        return [numbers(v) for v in x]
    return x
a, b = (numbers(json.load(open(p))) for p in sys.argv[1:3])
assert a == b, "report numbers differ"
with h5py.File(sys.argv[3]) as f, h5py.File(sys.argv[4]) as g:
    for name in f["entries"]:
        for ds in ("block_mask", "pv_skipped"):
            assert np.array_equal(f["entries"][name][ds][...], g["entries"][name][ds][...]), (name, ds)
print("report and masks identical")
PYEOF
  ;;
fault_bad_entry)
  # Entry l03 is unreadable (checksum error at read time): the rank that reads it fails, the job ends with
  # an error naming rank, host and entry, and finished groups are kept. l03 is the queue's last entry, so
  # the failing rank has finished the pieces it started with, all of l00 (rank 0) or of l01 (rank 1).
  "$SPARGE" synth cap.h5 --entries 4 --heads 2 --tokens 512 --dim 64 --seed 4 >/dev/null || fail synth
  $PY "$HERE/corrupt_entry.py" cap.h5 l03 >/dev/null || fail "corrupting the capture"
  mpi 2 tune cap.h5 "${TUNE[@]}" -o p.json >log 2>&1; rc=$?
  [ "$rc" -ne 0 ] || fail "a failed rank must fail the job: $(cat log)"
  grep -qE "error: rank [01] \($(hostname)[^)]*\) failed on entry l03: .*/entries/l03/q" log \
    || fail "error should name rank, host and entry: $(cat log)"
  $PY - p.json <<'PYEOF' || fail "partial parameter file"
import json, sys
p = json.load(open(sys.argv[1]))
names = [g["name"] for g in p["groups"]]
assert "l03" not in names, names
assert any(g["name"] in ("l00", "l01") and g["complete"] for g in p["groups"]), f"finished groups must be kept: {names}"
print("kept", names)
PYEOF
  ;;
fault_partial_then_resume)
  # Rank 1 fails after finishing 1 head, in the middle of its first piece (heads 2-3 of l00), as a lost GPU
  # would: the group is kept with the heads both ranks finished and "complete": false (rank 0 holds heads
  # 0-1, so at most 3 of 4), and --resume tunes only the rest, giving the file of an uninterrupted run.
  "$SPARGE" synth cap.h5 --entries 3 --heads 4 --tokens 1024 --dim 64 --seed 3 >/dev/null || fail synth
  reference cap.h5 one.json
  SPARGE_TEST_FAIL_AFTER_HEADS=1:1 mpi 2 tune cap.h5 "${TUNE[@]}" -o p.json >log 2>&1; rc=$?
  [ "$rc" -ne 0 ] || fail "the injected fault must fail the job: $(cat log)"
  grep -qE "error: rank 1 \([^)]*\) failed on entry l0[0-9]: .*injected fault" log || fail "error message: $(cat log)"
  $PY - p.json <<'PYEOF' || fail "partial parameter file"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["complete"] is False, "a file left by a failed job must say it is incomplete"
part = [g for g in p["groups"] if not g["complete"]]
assert part and all(0 < len(g["heads"]) < g["heads_q"] for g in part), p["groups"]
print("incomplete:", [(g["name"], [h["head"] for h in g["heads"]]) for g in part])
PYEOF
  mpi 2 tune cap.h5 "${TUNE[@]}" --resume p.json >log 2>&1 || fail "resume: $(cat log)"
  grep -qE "heads? kept" log || fail "resume should say what it kept: $(cat log)"
  same_file one.json p.json "a resumed file differs from an uninterrupted run"
  ;;
guards_np2)
  # The checks of one process hold for a job: rank 0 refuses an output that is an input or cannot be
  # written before any rank tunes, and each rank checks the memory of its share before loading it.
  "$SPARGE" synth cap.h5 --entries 3 --heads 4 --tokens 2048 --dim 64 --seed 2 >/dev/null || fail synth
  cp cap.h5 orig.h5
  mpi 2 run cap.h5 --engine cpu --masks cap.h5 >log 2>&1 && fail "run over its capture accepted"
  grep -q "is the same file as the input capture" log || fail "run --masks cap.h5: $(cat log)"
  mpi 2 tune cap.h5 "${TUNE[@]}" -o cap.h5 >log 2>&1 && fail "tune over its capture accepted"
  grep -q "is the same file as the input capture" log || fail "tune -o cap.h5: $(cat log)"
  cmp -s cap.h5 orig.h5 || fail "the capture was modified"
  mpi 2 tune cap.h5 "${TUNE[@]}" -o missing/p.json >log 2>&1 && fail "tune into a missing folder accepted"
  grep -q "does not exist" log || fail "tune -o missing/p.json: $(cat log)"
  ! grep -q "^tuning " log || fail "tune started before checking its output: $(cat log)"
  mpi 2 tune cap.h5 "${TUNE[@]}" --max-memory 1M -o p.json >log 2>&1 && fail "--max-memory 1M accepted"
  grep -qE "rank [01] \([^)]*\) failed on entry l0[0-9]: .*the --max-memory limit is 1 MiB" log \
    || fail "memory check: $(cat log)"
  [ ! -e p.json ] || fail "p.json written although nothing was tuned"
  ;;
resume_one_process)
  # --resume on one process, after an interruption.
  "$SPARGE" synth cap.h5 --entries 3 --heads 3 --tokens 768 --dim 64 --seed 8 >/dev/null || fail synth
  reference cap.h5 one.json
  SPARGE_TEST_FAIL_AFTER_HEADS=0:4 "$SPARGE" tune cap.h5 "${TUNE[@]}" --threads 1 -o p.json >log 2>&1
  [ "$?" -eq 1 ] || fail "injected fault should exit 1: $(cat log)"
  "$SPARGE" tune cap.h5 "${TUNE[@]}" --threads 1 --resume p.json >log 2>&1 || fail "resume: $(cat log)"
  grep -q "4 heads kept, 5 to tune" log || fail "resume plan: $(cat log)"
  same_file one.json p.json "resumed file differs from an uninterrupted run"
  # Other settings cannot be mixed into the file.
  out="$("$SPARGE" tune cap.h5 --l1 0.03 --l2 0.05 --engine cpu --resume p.json 2>&1)" && fail "mismatch accepted"
  grep -q -- "--l1" <<<"$out" || fail "mismatch message: $out"
  ;;
*)
  fail "unknown case $CASE" ;;
esac
echo "ok: $CASE"
