#!/usr/bin/env bash
# Runs the PyTorch capture-hook tests with the environment that scripts/install-py-deps.sh made.
# usage: run_hook_tests.sh VENV_DIR. Exit 77 (ctest: skipped) with the reason when that environment is absent.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VPY="$1/bin/python"
if [ ! -x "$VPY" ]; then
  echo "captures_hook_pytest skipped: no $VPY (scripts/install-py-deps.sh installs torch, transformers and the weights)"
  exit 77
fi
cd "$(mktemp -d)"  # the installed package, not the source tree, is what the tests import
exec "$VPY" -m pytest -q -rsx -p no:cacheprovider "$HERE/test_capture_hook.py" "$HERE/test_window_model.py" "$HERE/test_grid_hook.py"
