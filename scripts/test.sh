#!/usr/bin/env bash
# Install what is missing, build everything, run every test (ctest: unit, CLI end-to-end, Python,
# GUI under Xvfb; GPU tests skip without a device).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
BUILD="${SPARGE_BUILD_DIR:-$ROOT/build}"
cd "$BUILD"
ctest --output-on-failure -j "${SPARGE_TEST_JOBS:-2}" --timeout 1200
