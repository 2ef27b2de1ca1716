#!/usr/bin/env bash
# Runs the libFuzzer targets for a bounded time: each on a scratch copy of its seed corpus (the committed
# seeds are never changed), with a memory and a per-input time limit; a crash leaves its input in
# ARTIFACTS and fails the run.
# usage: run_fuzz.sh BUILD_DIR [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET defaults to $SPARGE_FUZZ_SECONDS or 40 (what CI runs: 2 minutes for the 3 targets). Longer runs, for example
#   `run_fuzz.sh build-fuzz 3600`, keep what they find in $SPARGE_FUZZ_CORPUS (default BUILD_DIR/fuzz-corpus)
#   and may use several processes: SPARGE_FUZZ_JOBS=4. Build first (see tests/fuzz/README.md).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="$(cd "$1" && pwd)"
SECONDS_EACH="${2:-${SPARGE_FUZZ_SECONDS:-40}}"
shift $(( $# >= 2 ? 2 : 1 ))
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(capture_reader params cli_options)
CORPUS_ROOT="${SPARGE_FUZZ_CORPUS:-$BUILD/fuzz-corpus}"
ARTIFACTS="${SPARGE_FUZZ_ARTIFACTS:-$BUILD/fuzz-artifacts}"
JOBS="${SPARGE_FUZZ_JOBS:-1}"
mkdir -p "$ARTIFACTS"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$HERE/lsan.supp:print_suppressions=0}"
# A file that makes HDF5 loop is a finding after 10 s (libFuzzer's -timeout), not after the reader's
# own, longer limit.
export SPARGE_CAPTURE_OPEN_TIMEOUT="${SPARGE_CAPTURE_OPEN_TIMEOUT:-2}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
for t in "${TARGETS[@]}"; do
  bin="$BUILD/tests/fuzz/fuzz_$t"
  [ -x "$bin" ] || { echo "run_fuzz: $bin not built (configure with -DSPARGE_BUILD_FUZZERS=ON)" >&2; exit 2; }
  corpus="$CORPUS_ROOT/$t"
  mkdir -p "$corpus"
  cp -n "$HERE/corpus/$t/"* "$corpus/" 2>/dev/null || true
  dict=()
  [ -f "$HERE/$t.dict" ] && dict=(-dict="$HERE/$t.dict")
  echo "fuzzing $t for ${SECONDS_EACH}s ($(ls "$corpus" | wc -l) inputs in the corpus)"
  # -timeout: one input may take 10 s at most (a hang is a bug); -rss_limit_mb: a memory blow-up is one.
  parallel=()
  [ "$JOBS" -gt 1 ] && parallel=(-fork="$JOBS")
  if ! (cd "$ARTIFACTS" && "$bin" "$corpus" "${dict[@]}" "${parallel[@]}" -max_total_time="$SECONDS_EACH" \
        -timeout=10 -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$ARTIFACTS/$t-" -print_final_stats=1 \
        >"$ARTIFACTS/$t.log" 2>&1); then
    echo "FAIL: fuzz_$t found a problem; input and log in $ARTIFACTS" >&2
    tail -40 "$ARTIFACTS/$t.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$ARTIFACTS/$t.log" | tail -2
  fi
done
exit $status
