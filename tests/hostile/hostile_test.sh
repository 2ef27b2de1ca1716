#!/usr/bin/env bash
# Hostile-input and output-safety checks of the sparge CLI. usage: hostile_test.sh SPARGE FAULT_LIB CASE PYTHON
# FAULT_LIB is the LD_PRELOAD library of write_fault.c (full disk, signals at chosen points); PYTHON has
# h5py and numpy.
# Each case exits non-zero with a message when a check fails.
set -uo pipefail
SPARGE="$1"
FAULT="$2"
CASE="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="$4"
WORK="$(mktemp -d)"
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
# shellcheck source=../cli/test_lib.sh
source "$HERE/../cli/test_lib.sh"
# Under sanitizers the runtime must come first; the fault library is preloaded after it.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

# No temporary file may be left in the folder: only the names given may exist.
only_files() {
  local extra
  extra="$(ls -A | grep -v -x -F "$(printf '%s\n' "$@")")"
  [ -z "$extra" ] || fail "unexpected files left behind: $extra"
}

same_bytes() { cmp -s "$1" "$2" || fail "$1 was modified (differs from $2)"; }

synth() { "$SPARGE" synth "$@" >/dev/null || fail "synth $*"; }

case "$CASE" in
same_file)
  # An export onto an input destroyed it; inputs are compared by device and inode, not by name.
  synth s.h5 --heads 2 --tokens 256 --dim 32
  cp s.h5 c.h5 && cp s.h5 orig.h5
  ln c.h5 hard.h5 && ln -s c.h5 soft.h5 && ln c.h5 hard.json && ln -s c.h5 soft.csv
  for args in "--masks c.h5" "--report hard.json" "--timings soft.csv" "--masks hard.h5" "--report soft.csv" \
              "--masks ./c.h5"; do
    # shellcheck disable=SC2086
    expect_exit 1 "is the same file as the input capture" -- "$SPARGE" run c.h5 --engine cpu $args
    same_bytes c.h5 orig.h5
  done
  expect_exit 1 "is the same file as the input capture" -- "$SPARGE" tune c.h5 --l1 0.05 --l2 0.06 -o c.h5
  same_bytes c.h5 orig.h5
  "$SPARGE" tune s.h5 --l1 0.05 --l2 0.06 --engine cpu -o p.json >/dev/null 2>&1 || fail "tune"
  cp p.json p_orig.json
  expect_exit 1 "is the same file as the input --params" -- "$SPARGE" run s.h5 --engine cpu --params p.json \
    --report p.json
  same_bytes p.json p_orig.json
  expect_exit 1 "give each output its own path" -- "$SPARGE" run s.h5 --engine cpu --masks o.json --report o.json
  [ ! -e o.json ] || fail "o.json written although the command was refused"
  ;;
outputs_first)
  # Output paths are checked before any work: a bad one fails at once, not after the whole run.
  synth s.h5 --heads 2 --tokens 256 --dim 32
  echo x > plainfile
  mkdir adir.json
  for spec in "--report missing/r.json|does not exist" "--masks plainfile/m.h5|is not a folder" \
              "--report adir.json|is a folder" "--timings missing/t.json|does not exist"; do
    args="${spec%%|*}" msg="${spec##*|}"
    # shellcheck disable=SC2086
    out="$("$SPARGE" run s.h5 --engine cpu $args 2>&1)" && fail "run $args succeeded"
    grep -qF -- "$msg" <<<"$out" || fail "run $args: message lacks '$msg': $out"
    grep -qF -- "${args%% *}" <<<"$out" || fail "run $args: message does not name the option: $out"
    ! grep -q "entries in" <<<"$out" || fail "run $args computed before failing: $out"
  done
  out="$("$SPARGE" tune s.h5 --l1 0.05 --l2 0.06 --engine cpu -o missing/p.json 2>&1)" && fail "tune succeeded"
  grep -q "does not exist" <<<"$out" || fail "tune: $out"
  ! grep -q "tuning " <<<"$out" || fail "tune started before checking its output: $out"
  # Formats chosen by the name are checked when the options are parsed (exit 2); a name longer than the
  # file system takes before any work (exit 1). Messages name the option and echo the name shortened.
  long="$(printf 'r%.0s' $(seq 1 295)).json"
  for spec in "2|--timings t.xyz|unknown format" "2|--report r.xyz|unknown format" "2|--report R.XLSX|unknown format" \
              "1|--report $long|the file name is 300 bytes long" "1|--masks $long|the file name is 300 bytes long"; do
    IFS='|' read -r want args msg <<<"$spec"
    # shellcheck disable=SC2086
    out="$("$SPARGE" run s.h5 --engine cpu $args 2>&1)"
    rc=$?
    [ "$rc" -eq "$want" ] || fail "run ${args:0:40}: exit $rc, expected $want: ${out:0:400}"
    grep -qF -- "$msg" <<<"$out" || fail "run ${args:0:40}: message lacks '$msg': ${out:0:400}"
    grep -qF -- "${args%% *}" <<<"$out" || fail "run ${args:0:40}: message does not name the option: ${out:0:400}"
    ! grep -q "entries in" <<<"$out" || fail "run ${args:0:40} computed before failing"
    [ "${#out}" -lt 1000 ] || fail "run ${args:0:40}: the name was echoed whole (${#out} bytes)"
  done
  expect_exit 1 "the file name is 300 bytes long" -- "$SPARGE" tune s.h5 --l1 0.05 --l2 0.06 --engine cpu -o "$long"
  expect_exit 1 "the file name is 300 bytes long" -- "$SPARGE" synth "$long"
  only_files s.h5 plainfile adir.json
  ;;
names)
  # Entry names with CSV/JSON specials, terminal escapes and non-UTF-8 bytes; a non-UTF-8 capture path.
  $PY "$HERE/make_special.py" names n.h5 || fail "make names capture"
  cp n.h5 "$(printf 'cap\xff.h5')"
  out="$("$SPARGE" run "$(printf 'cap\xff.h5')" --engine cpu --report r.csv 2>&1)" || fail "run (csv): $out"
  ! grep -q $'\x1b' <<<"$out" || fail "a terminal escape from an entry name reached the terminal"
  "$SPARGE" run "$(printf 'cap\xff.h5')" --engine cpu --report r.json --masks m.h5 >/dev/null 2>&1 \
    || fail "run with JSON report and masks"
  "$SPARGE" tune n.h5 --l1 0.08 --l2 0.09 --engine cpu -o p.json >/dev/null 2>&1 || fail "tune"
  "$SPARGE" run n.h5 --engine cpu --params p.json --report rp.json >/dev/null 2>&1 || fail "run --params"
  $PY - <<'PYEOF' || fail "export contents"
import csv, json
import h5py
names = ['a,b "quoted"\nnext line', "\x1b[31mred\x1b[0m", "bytes\\xff\\xfe-not-utf8", "plain"]
rows = list(csv.DictReader(open("r.csv", newline="")))
assert sorted({r["entry"] for r in rows}) == sorted(names), {r["entry"] for r in rows}
assert len(rows) == 8 and all(r["head"] in ("0", "1") for r in rows), rows
r = json.load(open("r.json"))
assert r["capture"] == "cap\\xff.h5", r["capture"]
assert sorted(e["name"] for e in r["entries"]) == sorted(names)
with h5py.File("m.h5", "r") as f:
    assert len(f["entries"]) == 4
p = json.load(open("p.json"))
assert sorted(n for g in p["groups"] for n in g["entries"]) == sorted(names)
rp = json.load(open("rp.json"))
assert len(rp["entries"]) == 4
print("names ok")
PYEOF
  ;;
targets)
  # Symbolic links are followed (the link stays, its target is replaced), modes are kept, read-only
  # targets are refused and left alone.
  synth s.h5 --heads 2 --tokens 256 --dim 32
  echo '{"old": 1}' > real.json && chmod 600 real.json && ln -s real.json link.json
  "$SPARGE" run s.h5 --engine cpu --report link.json >/dev/null 2>&1 || fail "report through a link"
  [ -L link.json ] || fail "the symbolic link was replaced by a file"
  grep -q sparge_report_version real.json || fail "the link's target was not written"
  [ "$(stat -c %a real.json)" = 600 ] || fail "mode not kept: $(stat -c %a real.json)"
  echo '{"old": 2}' > ro.json && chmod 444 ro.json && cp ro.json ro_orig.json
  expect_exit 1 "is read-only" -- "$SPARGE" run s.h5 --engine cpu --report ro.json
  same_bytes ro.json ro_orig.json
  [ "$(stat -c %a ro.json)" = 444 ] || fail "read-only file changed mode"
  ln -s ro.json ro_link.json
  expect_exit 1 "is read-only" -- "$SPARGE" run s.h5 --engine cpu --masks ro_link.json
  synth new.h5 --heads 1 --tokens 128 --dim 32
  [ "$(stat -c %a new.h5)" = "$(printf '%o' $((0666 & ~$(umask))))" ] || fail "new file mode $(stat -c %a new.h5)"
  only_files s.h5 real.json link.json ro.json ro_orig.json ro_link.json new.h5
  ;;
signals)
  # SIGINT, SIGTERM or SIGKILL while an export is written: the previous file stays as it was and no
  # temporary file is left. At the rename: INT/TERM wait for it (the new file is complete); KILL may
  # leave a hidden temporary, which the next export to that file removes.
  synth s.h5 --heads 4 --tokens 1024 --dim 32
  "$SPARGE" run s.h5 --engine cpu --report new.json --masks new.h5 >/dev/null 2>&1 || fail "reference run"
  for sig in 2 15 9; do
    for what in "--report r.json" "--masks r.json"; do
      echo '{"previous": true}' > r.json && cp r.json prev.json
      # shellcheck disable=SC2086
      LD_PRELOAD="$FAULT" SPARGE_FAULT_SIGNAL=$sig SPARGE_FAULT_SIGNAL_AFTER=2000 \
        "$SPARGE" run s.h5 --engine cpu $what >/dev/null 2>&1
      rc=$?
      [ "$rc" -eq $((128 + sig)) ] || fail "signal $sig mid-write ($what): exit $rc, expected $((128 + sig))"
      same_bytes r.json prev.json
      only_files s.h5 new.json new.h5 r.json prev.json
    done
  done
  for sig in 2 15; do
    echo '{"previous": true}' > r.json
    LD_PRELOAD="$FAULT" SPARGE_FAULT_SIGNAL=$sig SPARGE_FAULT_SIGNAL_AT_RENAME=1 \
      "$SPARGE" run s.h5 --engine cpu --report r.json >/dev/null 2>&1
    rc=$?
    [ "$rc" -eq $((128 + sig)) ] || fail "signal $sig at rename: exit $rc"
    $PY -c "import json,sys; a=json.load(open('r.json')); b=json.load(open('new.json')); \
a['entries'][0].pop('times_ms'); b['entries'][0].pop('times_ms'); sys.exit(a != b)" \
      || fail "signal $sig at rename: r.json is not the complete new report"
    only_files s.h5 new.json new.h5 r.json prev.json
  done
  echo '{"previous": true}' > r.json && cp r.json prev.json
  LD_PRELOAD="$FAULT" SPARGE_FAULT_SIGNAL=9 SPARGE_FAULT_SIGNAL_AT_RENAME=1 \
    "$SPARGE" run s.h5 --engine cpu --report r.json >/dev/null 2>&1
  same_bytes r.json prev.json
  "$SPARGE" run s.h5 --engine cpu --report r.json >/dev/null 2>&1 || fail "run after a SIGKILL at rename"
  only_files s.h5 new.json new.h5 r.json prev.json
  ;;
disk_full)
  # A disk that fills up during an export: a clear error (exit 1, no crash), the previous file intact,
  # nothing left behind. Simulated with the fault library, and on a real small tmpfs when mounting works.
  synth s.h5 --heads 4 --tokens 1024 --dim 32
  for what in "--masks out.h5" "--report out.json"; do
    target="${what#* }"
    rm -f out.h5 out.json && echo previous > "$target" && cp "$target" prev.h5
    # shellcheck disable=SC2086
    out="$(LD_PRELOAD="$FAULT" SPARGE_FAULT_ENOSPC_AFTER=3000 "$SPARGE" run s.h5 --engine cpu $what 2>&1)"
    rc=$?
    [ "$rc" -eq 1 ] || fail "full disk ($what): exit $rc, expected 1: $out"
    grep -q "$target" <<<"$out" || fail "the error does not name the file: $out"
    same_bytes "$target" prev.h5
    only_files s.h5 "$target" prev.h5
  done
  rm -f out.json && echo previous > out.h5
  out="$(LD_PRELOAD="$FAULT" SPARGE_FAULT_ENOSPC_AFTER=3000 "$SPARGE" synth big.h5 --heads 4 --tokens 1024 2>&1)"
  [ $? -eq 1 ] || fail "synth on a full disk: $out"
  only_files s.h5 out.h5 prev.h5
  if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
    mkdir small
    cat > in_tmpfs.sh <<EOF
set -u
mount -t tmpfs -o size=96k tmpfs small || exit 77
head -c 88k /dev/zero > small/fill   # 22 of 24 pages: one page stays free
echo previous > small/out.h5
"$SPARGE" run s.h5 --engine cpu --masks small/out.h5 --report small/r.json; echo "rc=\$?"
"$SPARGE" synth small/big.h5 --heads 4 --tokens 4096; echo "rc=\$?"
echo "files: \$(ls -A small | tr '\n' ' ')"; cat small/out.h5
EOF
    out="$(unshare -m bash in_tmpfs.sh 2>&1)"
    if [ $? -ne 77 ]; then
      grep -q "rc=139\|rc=134" <<<"$out" && fail "crash on a full tmpfs: $out"
      [ "$(grep -c 'rc=1$' <<<"$out")" -eq 2 ] || fail "full tmpfs: both commands must fail with 1: $out"
      grep -q "^files: fill out.h5 $" <<<"$out" || fail "full tmpfs: files left: $out"
      grep -q "^previous$" <<<"$out" || fail "full tmpfs: the previous file changed: $out"
      echo "real tmpfs checked"
    fi
  fi
  ;;
concurrent)
  # Writers racing for one file: the result is one complete export, never a mix, and no temporaries.
  synth s.h5 --heads 4 --tokens 1024 --dim 32
  pids=()
  for tau in 0.5 0.7 0.9 0.95 0.99 0.8; do
    "$SPARGE" run s.h5 --engine cpu --threads 1 --tau $tau --report same.json --masks same.h5 >/dev/null 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "a concurrent writer failed"; done
  $PY - <<'PYEOF' || fail "concurrent result"
import json
import h5py
r = json.load(open("same.json"))
taus = {h["params"]["cdfthreshd"] for h in r["entries"][0]["heads"]}
assert len(taus) == 1 and taus <= {0.5, 0.7, 0.9, 0.95, 0.99, 0.8}, taus
with h5py.File("same.h5", "r") as f:
    assert float(f["entries/l00"].attrs["cdfthreshd"]) in (0.5, 0.7, 0.9, 0.95, 0.99, 0.8)
print("one complete export of", taus)
PYEOF
  only_files s.h5 same.json same.h5
  ;;
tune_complete)
  # Checkpoints and interrupted files say "complete": false at the top level; a finished file true.
  synth s.h5 --entries 6 --heads 6 --tokens 1536 --dim 64   # slow enough to be interrupted
  synth small.h5 --entries 2 --heads 2 --tokens 512 --dim 64
  "$SPARGE" tune small.h5 --l1 0.05 --l2 0.06 --engine cpu --entry l00 -o done.json >/dev/null 2>&1 || fail "tune"
  $PY -c "import json; assert json.load(open('done.json'))['complete'] is True" || fail "finished file not complete"
  for sig in INT TERM; do
    rm -f p.json
    "$SPARGE" tune s.h5 --l1 0.03 --l2 0.04 --engine cpu --threads 1 -o p.json >log 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do [ -s p.json ] && break; sleep 0.1; done
    [ -s p.json ] || { kill -9 $pid; fail "no checkpoint appeared"; }
    $PY -c "import json; assert json.load(open('p.json'))['complete'] is False" \
      || { kill -9 $pid; fail "a checkpoint must say complete: false"; }
    kill -s $sig $pid
    wait $pid
    rc=$?
    [ "$rc" -eq 130 ] || fail "tune exited $rc after SIG$sig, expected 130: $(cat log)"
    $PY -c "import json; p = json.load(open('p.json')); assert p['complete'] is False and p['groups'], p" \
      || fail "the interrupted file must say complete: false"
  done
  # A disk that fills after the first checkpoint: tuning goes on, the end fails clearly, and the file
  # left behind says it is incomplete.
  size=$(LD_PRELOAD="" "$SPARGE" tune small.h5 --l1 0.05 --l2 0.06 --engine cpu --entry l00 -o one.json >/dev/null 2>&1;
         stat -c %s one.json)
  out="$(LD_PRELOAD="$FAULT" SPARGE_FAULT_ENOSPC_AFTER=$((size + 10)) "$SPARGE" tune small.h5 --l1 0.05 --l2 0.06 \
    --engine cpu --entry l00 --entry l01 -o q.json 2>&1)"
  rc=$?
  [ "$rc" -eq 1 ] || fail "tune on a filling disk: exit $rc: $out"
  grep -q "checkpoint not written" <<<"$out" || fail "no checkpoint warning: $out"
  grep -q 'still holds the checkpoint of 1 finished group' <<<"$out" || fail "no final explanation: $out"
  $PY -c "import json; p = json.load(open('q.json')); assert p['complete'] is False and len(p['groups']) == 1" \
    || fail "the file left by a failed write must say complete: false"
  # Tuning some heads on purpose is not an interruption.
  "$SPARGE" tune small.h5 --l1 0.05 --l2 0.06 --engine cpu --entry l00 --heads 1 -o h1.json >/dev/null 2>&1 \
    || fail "tune --heads 1"
  out="$("$SPARGE" run small.h5 --engine cpu --entry l00 --params h1.json 2>&1)" || fail "run --params h1.json: $out"
  grep -q "only some heads were tuned" <<<"$out" || fail "subset warning: $out"
  ! grep -q "interrupted" <<<"$out" || fail "a --heads file is not interrupted: $out"
  ;;
tune_checkpoints)
  # Every checkpoint rewrites the whole parameter file; on a slow disk (each rename 300 ms) they are spaced
  # (once the file holds 4 groups, after a write that took t, none for 20·t) instead of one per group, and
  # the final file is the one an unhindered run writes. One checkpoint per group would be 24 of them here,
  # plus the final write.
  synth s.h5 --entries 24 --heads 1 --tokens 256 --dim 32
  "$SPARGE" tune s.h5 --l1 0.05 --l2 0.06 --engine cpu -o fast.json >/dev/null 2>&1 || fail "tune"
  SPARGE_FAULT_RENAME_MS=300 SPARGE_FAULT_RENAME_LOG="$WORK/renames" LD_PRELOAD="$FAULT" \
    "$SPARGE" tune s.h5 --l1 0.05 --l2 0.06 --engine cpu -o slow.json >/dev/null 2>&1 || fail "tune on a slow disk"
  n="$(grep -c 'slow\.json$' renames)"
  [ "$n" -ge 2 ] || fail "a checkpoint and the final write expected, $n renames of slow.json"
  [ "$n" -le 6 ] || fail "checkpoints not spaced on a slow disk: $n renames of slow.json for 24 groups"
  cmp -s fast.json slow.json || fail "the spaced checkpoints changed the final file"
  $PY -c "import json; assert json.load(open('slow.json'))['complete'] is True" || fail "final file not complete"
  ;;
duplicates)
  # --heads 0,0,0 counts head 0 once in the totals; a repeated --entry is run and exported once.
  synth s.h5 --entries 2 --heads 4 --tokens 512 --dim 32
  "$SPARGE" run s.h5 --engine cpu --heads 0 --report one.json >/dev/null 2>&1 || fail "run --heads 0"
  "$SPARGE" run s.h5 --engine cpu --heads 0,0,0 --report three.json >/dev/null 2>&1 || fail "run --heads 0,0,0"
  $PY - <<'PYEOF' || fail "totals with a repeated head"
import json
a, b = json.load(open("one.json")), json.load(open("three.json"))
for ea, eb in zip(a["entries"], b["entries"]):
    assert len(eb["heads"]) == 1, len(eb["heads"])
    for key in ("valid_blocks", "selected_blocks", "computed_pv_blocks", "skipped_pv_blocks", "l1"):
        assert ea["totals"][key] == eb["totals"][key], (key, ea["totals"][key], eb["totals"][key])
PYEOF
  out="$("$SPARGE" run s.h5 --engine cpu --entry l01 --entry l01 --masks m.h5 --report r.json 2>&1)" \
    || fail "repeated --entry: $out"
  $PY -c "
import json, h5py
assert list(h5py.File('m.h5')['entries']) == ['l01']
assert [e['name'] for e in json.load(open('r.json'))['entries']] == ['l01']" || fail "repeated --entry exported twice"
  ;;
memory)
  # The memory a run needs is estimated before loading; too much is an error that says how much and
  # what to do, not a bad_alloc (or minutes of swapping) later.
  synth s.h5 --heads 4 --tokens 2048 --dim 64
  expect_exit 1 "needs about" -- "$SPARGE" run s.h5 --engine cpu --max-memory 1M
  expect_exit 1 "--heads" -- "$SPARGE" run s.h5 --engine cpu --max-memory 1M
  expect_exit 1 "the --max-memory limit is 1 MiB" -- "$SPARGE" tune s.h5 --l1 0.05 --l2 0.06 --engine cpu --max-memory 1M -o p.json
  expect_exit 2 "is not a size" -- "$SPARGE" run s.h5 --engine cpu --max-memory lots
  "$SPARGE" run s.h5 --engine cpu --max-memory 1G >/dev/null 2>&1 || fail "run within --max-memory 1G"
  $PY "$HERE/make_special.py" big_grid big.h5 || fail "make big_grid capture"
  start=$(date +%s)
  expect_exit 1 "MemAvailable" -- "$SPARGE" run big.h5 --engine cpu
  expect_exit 1 "--entry" -- "$SPARGE" run big.h5 --engine cpu
  [ $(($(date +%s) - start)) -lt 20 ] || fail "the memory check came late"
  ;;
special_inputs)
  # FIFOs and devices as inputs are refused at once instead of blocking in open().
  synth s.h5 --heads 2 --tokens 256 --dim 32
  mkfifo f.h5 p.json
  expect_exit 1 "FIFO" -- timeout 20 "$SPARGE" info f.h5
  expect_exit 1 "FIFO" -- timeout 20 "$SPARGE" run s.h5 --engine cpu --params p.json
  expect_exit 1 "device" -- timeout 20 "$SPARGE" info /dev/zero
  ;;
nonfinite_scores)
  # Finite inputs whose scores overflow (values near 3e38, scale 1e300) must be flagged, never shown as
  # L1 0 / cos 1.
  $PY "$HERE/make_special.py" nonfinite nf.h5 || fail "make nonfinite capture"
  out="$("$SPARGE" run nf.h5 --engine cpu --report r.json 2>&1)"
  [ $? -le 1 ] || fail "crash: $out"
  if [ -s r.json ]; then
    $PY - <<'PYEOF' || fail "non-finite scores were not flagged"
import json
for e in json.load(open("r.json"))["entries"]:
    for h in e["heads"]:
        assert h["non_finite"], (e["name"], h["head"], "not flagged")
        assert not (h["l1"] == 0 and h["cos_sim"] == 1), (e["name"], h["head"], "L1 0 / cos 1 shown as right")
PYEOF
  fi
  ;;
threads)
  # --threads beyond what the machine runs is capped with a note; a thread the system refuses to start is an
  # error naming --threads (exit 1), never an abort. The pools join what started before they throw.
  synth t.h5 --heads 256 --tokens 128 --dim 16
  out="$("$SPARGE" run t.h5 --engine cpu --threads 100000 --summary-only 2>&1)" || fail "run --threads 100000: $out"
  grep -q "note: --threads 100000 capped at" <<<"$out" || fail "no note about the cap: $out"
  # (ldd's output taken whole first: under pipefail, grep -q leaving early can fail ldd with SIGPIPE)
  if ! grep -q libasan <<<"$(ldd "$SPARGE" 2>/dev/null)"; then
    # An address-space limit (AddressSanitizer reserves terabytes, so not under it): each thread's stack counts.
    out="$(ulimit -v 8000000; "$SPARGE" run t.h5 --engine cpu --threads 1000 --summary-only 2>&1)"
    rc=$?
    [ "$rc" -le 1 ] || fail "run --threads 1000 under ulimit -v: exit $rc: $out"
  fi
  for cmd in "run t.h5 --engine cpu --threads 8" "tune t.h5 --l1 0.05 --l2 0.06 --engine cpu --threads 8 -o p.json"; do
    # shellcheck disable=SC2086
    out="$(LD_PRELOAD="$FAULT" SPARGE_FAULT_THREADS_AFTER=2 "$SPARGE" $cmd 2>&1)"
    rc=$?
    [ "$rc" -eq 1 ] || fail "$cmd with failing thread starts: exit $rc, expected 1: $out"
    grep -q "could not start thread" <<<"$out" || fail "$cmd: message lacks the cause: $out"
    grep -q -- "--threads" <<<"$out" || fail "$cmd: message does not name --threads: $out"
  done
  out="$(LD_PRELOAD="$FAULT" SPARGE_FAULT_THREADS_AFTER=0 "$SPARGE" synth u.h5 --entries 3 --threads 2 2>&1)"
  [ $? -eq 1 ] || fail "synth with failing thread starts: $out"
  grep -q -- "--threads" <<<"$out" || fail "synth: message does not name --threads: $out"
  only_files t.h5
  ;;
synth_sizes)
  # Shapes whose sizes overflow int64, segments near the int64 limit and sizes beyond memory are refused
  # before anything is allocated or written, naming the option; an existing output stays as it was.
  echo previous > x.h5 && cp x.h5 prev.h5
  expect_exit 2 "--batch" -- "$SPARGE" synth x.h5 --batch 4294967296 --heads 4294967296 --tokens 1 --dim 1
  expect_exit 2 "--batch/--heads/--tokens/--dim" -- "$SPARGE" synth x.h5 --batch 2147483647 --heads 2147483647 \
    --tokens 1 --dim 1
  expect_exit 2 "--kv-heads" -- "$SPARGE" synth x.h5 --heads 6 --kv-heads 4
  expect_exit 2 "--segment" -- "$SPARGE" synth x.h5 --segment 9223372036854775807
  expect_exit 2 "--segment" -- "$SPARGE" synth x.h5 --segment 0
  expect_exit 1 "needs about 384.0 GiB" -- "$SPARGE" synth x.h5 --heads 4096 --tokens 65536 --dim 128 \
    --max-memory 64G
  expect_exit 1 "--max-memory limit is 1 MiB" -- "$SPARGE" synth x.h5 --heads 4 --tokens 1024 --max-memory 1M
  same_bytes x.h5 prev.h5
  # A segment longer than the sequence is one segment (its token count no longer overflows).
  synth long_segment.h5 --heads 1 --tokens 300 --dim 8 --segment 2147483647
  only_files x.h5 prev.h5 long_segment.h5
  ;;
synth_values)
  # --sharpness outside [0, 1000] would write NaN or Inf everywhere; the ends of the range stay finite in
  # float16 (checked with numpy).
  for bad in -1 nan inf 1e30 1001 ""; do
    expect_exit 2 "--sharpness" -- "$SPARGE" synth x.h5 --sharpness="$bad"
  done
  synth lo.h5 --heads 2 --tokens 256 --dim 2048 --sharpness 0
  synth hi.h5 --heads 2 --tokens 256 --dim 2048 --sharpness 1000
  $PY - <<'PYEOF' || fail "synthetic values not finite"
import h5py, numpy as np
for name in ("lo.h5", "hi.h5"):
    with h5py.File(name) as f:
        for t in ("q", "k", "v"):
            a = f["entries/l00"][t][...]
            assert np.isfinite(a).all(), (name, t)
PYEOF
  only_files lo.h5 hi.h5
  ;;
empty_values)
  # Empty, NaN, infinite, negative, wrapping and unbounded values are usage errors (exit 2) that name the
  # option, before any work.
  synth s.h5 --heads 2 --tokens 256 --dim 32
  while IFS='|' read -r option args; do
    eval "set -- $args"
    expect_exit 2 "$option" -- "$SPARGE" "$@"
  done <<'CASES'
--theta|run s.h5 --theta ''
--theta|run s.h5 --theta nan
--tau|run s.h5 --tau 1e400
--lambda|run s.h5 --lambda inf
--heads|run s.h5 --heads ''
--heads|run s.h5 --heads -1
--report|run s.h5 --report ''
--masks|run s.h5 --masks ''
--entry|run s.h5 --entry ''
--params|run s.h5 --params ''
file|run ''
file|info ''
--threads|run s.h5 --threads -1
--threads|run s.h5 --threads 99999999999
--threads|compare s.h5 --methods moba --l1 0.05 --threads -1
--heads|compare s.h5 --methods moba --l1 0.05 --heads -1
--max-memory|run s.h5 --max-memory 1e300t
--max-memory|run s.h5 --max-memory inf
--max-memory|run s.h5 --max-memory ''
--seed|synth x.h5 --seed=-1
--seed|synth x.h5 --seed 18446744073709551616
--heads|synth x.h5 --heads ''
--l1|tune s.h5 --l1 nan --l2 0.1 -o p.json
--l2|tune s.h5 --l1 0.05 --l2 '' -o p.json
-o|tune s.h5 --l1 0.05 --l2 0.06 -o ''
CASES
  only_files s.h5
  ;;
window_hint)
  # Rows that the entry's window leaves without any key are not the selection's fault: their warning says
  # so (with the count a numpy-free transcription of the window rule gives) and never offers --sink, which
  # cannot help them, whatever the options.
  $PY "$HERE/make_special.py" window_empty w.h5 || fail "make window_empty capture"
  want="$($PY -c "print(sum(1 for t in range(512) if max(0, t - 64) > min(127, t)))")"
  for opts in "" "--dense" "--sink" "--dense --sink"; do
    # shellcheck disable=SC2086
    out="$("$SPARGE" run w.h5 --engine cpu $opts 2>&1)" || fail "run $opts: $out"
    grep -q "head 0: $want query rows have no key inside their window \[64, 0\]" <<<"$out" \
      || fail "run $opts: no window warning for $want rows: $out"
    ! grep -q "sink keeps key block 0" <<<"$out" || fail "run $opts: the --sink hint cannot help these rows: $out"
  done
  ;;
bounded_echo)
  # Strings from files and options are echoed shortened (start…end, with their length): a 10 MB module
  # attribute or a 100 KB entry name costs a line, not megabytes of output.
  $PY "$HERE/make_special.py" big_attrs a.h5 || fail "make big_attrs capture"
  for args in "" "--group-by module"; do
    # shellcheck disable=SC2086
    out="$("$SPARGE" info a.h5 $args 2>&1)" || fail "info $args failed: ${out:0:400}"
    bytes="$(printf %s "$out" | wc -c)"
    [ "$bytes" -lt 20000 ] || fail "info $args printed $bytes bytes"
  done
  out="$("$SPARGE" info a.h5)"
  grep -q "model.layers.0.x*…x*.self_attn (10485785 bytes)" <<<"$out" || fail "module not shortened"
  grep -q "18446744073709551615" <<<"$out" || fail "uint64 root attribute not shown exactly"
  name="$(head -c 100000 /dev/zero | tr '\0' e)"
  out="$("$SPARGE" run a.h5 --engine cpu --entry "$name" 2>&1)"
  [ $? -eq 1 ] || fail "an unknown 100 KB entry name must fail with 1"
  [ "${#out}" -lt 2000 ] || fail "the error echoed ${#out} bytes"
  grep -q "(100000 bytes)" <<<"$out" || fail "the error does not give the name's length: ${out:0:300}"
  ;;
messages)
  # A FIFO as --params or --resume, an unknown command, an attribute beyond int64.
  synth s.h5 --heads 2 --tokens 256 --dim 32
  mkfifo p.json
  for args in "run s.h5 --engine cpu --params p.json" "tune s.h5 --l1 0.05 --l2 0.06 --engine cpu --resume p.json"; do
    # shellcheck disable=SC2086
    out="$(timeout 20 "$SPARGE" $args 2>&1)"
    [ $? -eq 1 ] || fail "$args: $out"
    grep -q "FIFO" <<<"$out" || fail "$args: $out"
    ! grep -q "file file" <<<"$out" || fail "$args: doubled word: $out"
  done
  expect_exit 2 "unknown command 'bogus'" -- "$SPARGE" bogus s.h5
  expect_exit 2 "no command given" -- "$SPARGE"
  $PY "$HERE/make_special.py" uint64_layer u.h5 || fail "make uint64_layer capture"
  expect_exit 1 "attribute layer = 9223372036854775808 lies beyond" -- "$SPARGE" info u.h5
  ;;
heads_list)
  # --heads takes the same comma-separated list in tune as in run.
  synth s.h5 --heads 4 --tokens 256 --dim 32
  "$SPARGE" tune s.h5 --l1 0.05 --l2 0.06 --engine cpu --heads 0,2 -o p.json >/dev/null 2>&1 || fail "tune --heads 0,2"
  "$SPARGE" tune s.h5 --l1 0.05 --l2 0.06 --engine cpu --heads 1 --heads 3 -o q.json >/dev/null 2>&1 \
    || fail "tune --heads 1 --heads 3"
  $PY - <<'PYEOF' || fail "tuned heads"
import json
for name, want in (("p.json", [0, 2]), ("q.json", [1, 3])):
    heads = sorted(h["head"] for g in json.load(open(name))["groups"] for h in g["heads"])
    assert heads == want, (name, heads)
PYEOF
  expect_exit 1 "head 4" -- "$SPARGE" tune s.h5 --l1 0.05 --l2 0.06 --engine cpu --heads 0,4 -o r.json
  ;;
*)
  fail "unknown case $CASE" ;;
esac
echo "ok: $CASE"
