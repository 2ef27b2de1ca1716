#!/usr/bin/env bash
# The sanitizer job of CI.
# 1. The CLI and the core tests built with AddressSanitizer and UndefinedBehaviorSanitizer (any report ends
#    the process that made it and fails its test), then: the core unit tests, the parameter-file tests, the
#    CLI end-to-end cases, the malformed corpus and the hostile CLI cases.
# 2. The libFuzzer targets built with clang (same sanitizers) and run for a bounded time each.
# Left to the normal build (they test numbers and timing, not memory safety, and take minutes under the
# sanitizers): the tuner's search tests, the whole-sample run, the interrupt timing cases, MPI, the GUI.
# usage: sanitizer_job.sh [BUILD_ROOT]   (default: the repository; builds go to build-sanitize, build-fuzz)
#   SPARGE_FUZZ_SECONDS: seconds per fuzz target (default 40, three targets); SPARGE_JOBS: build jobs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-$ROOT}"
SAN="-O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
JOBS="${SPARGE_JOBS:-$(nproc)}"
COMMON=(-DCMAKE_BUILD_TYPE=Debug -DSPARGE_WITH_CUDA=OFF -DSPARGE_WITH_GUI=OFF -DSPARGE_WITH_MPI=OFF
        -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="$SAN"
        -DCMAKE_SHARED_LINKER_FLAGS="$SAN" -DCMAKE_MODULE_LINKER_FLAGS="$SAN")
if command -v ccache >/dev/null 2>&1; then
  COMMON+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
generator() { if command -v ninja >/dev/null 2>&1 && [ ! -f "$1/Makefile" ]; then echo "-GNinja"; fi; }

# A finding ends the process with a distinctive status; leaks are findings too (except HDF5's own).
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:exitcode=86"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87"
export LSAN_OPTIONS="suppressions=$ROOT/tests/fuzz/lsan.supp:print_suppressions=0"

t0=$(date +%s)
SANITIZE="$OUT/build-sanitize"
cmake -S "$ROOT" -B "$SANITIZE" $(generator "$SANITIZE") "${COMMON[@]}" >/dev/null
cmake --build "$SANITIZE" -j "$JOBS" --target sparge sparge_core_tests sparge_tuner_tests sparge_write_fault
t1=$(date +%s)
"$SANITIZE/tests/core/sparge_core_tests" --gtest_brief=1 --gtest_filter='-CaptureBenchmark.*'
"$SANITIZE/tests/tuner/sparge_tuner_tests" --gtest_brief=1 --gtest_filter='-Tuner.*'
(cd "$SANITIZE" && ctest --output-on-failure -j "${SPARGE_TEST_JOBS:-2}" --timeout 1200 \
  -R '^(cli_.*|hostile_.*)$' -E '^(cli_sample|cli_tune_interrupt|hostile_tune_complete|hostile_nonfinite_scores)$')
t2=$(date +%s)

# libFuzzer needs clang; only the fuzz targets (core, the CLI's sources and three entry points) are built
# with it.
FUZZ="$OUT/build-fuzz"
cmake -S "$ROOT" -B "$FUZZ" $(generator "$FUZZ") "${COMMON[@]}" -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DSPARGE_BUILD_FUZZERS=ON >/dev/null
cmake --build "$FUZZ" -j "$JOBS" --target fuzz_capture_reader fuzz_params fuzz_cli_options
t3=$(date +%s)
"$ROOT/tests/fuzz/run_fuzz.sh" "$FUZZ" "${SPARGE_FUZZ_SECONDS:-40}"
t4=$(date +%s)
echo "sanitizer job: build $((t1 - t0)) s, tests $((t2 - t1)) s, fuzz build $((t3 - t2)) s, fuzzing $((t4 - t3)) s"
