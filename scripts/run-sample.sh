#!/usr/bin/env bash
# The main job: install what is missing, build, and run SpargeAttn (default parameters) on the bundled
# real sample capture, printing the per-head table. Extra arguments go to `sparge run`.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
BUILD="${SPARGE_BUILD_DIR:-$ROOT/build}"
"$BUILD/cli/sparge" info
"$BUILD/cli/sparge" run "$@"
